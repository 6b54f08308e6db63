//! Training-graph construction: forward graph → forward + backward + update.
//!
//! Takes a forward [`Graph`] with a scalar loss, the operator [`Library`] and
//! an [`Optimizer`]; gives the training graph of one step:
//!
//! * **Backward** (reverse-mode, from each spec's `grad` declarations): the
//!   loss is seeded with the scalar gradient 1 (tensor `grad/<loss>`, a
//!   constant). Forward ops are visited in reverse topological order; for an op
//!   with an input that depends on a weight, each declaration
//!   `grad x, ... = g(args)` whose bound inputs need a gradient becomes one
//!   operator of spec `g` named `bwd/<op>/<x,...>`, whose arguments are the
//!   forward op's inputs and outputs and the total gradients `grad(y)` of its
//!   outputs. An output with no gradient contribution (e.g. the last cell
//!   state of an LSTM) gets a zero gradient `scale<alpha = 0>(y)`. Gradient
//!   attributes are evaluated from the forward op's bound dims and attributes.
//! * **Gradient sums** (Tofu §4.2.1): a tensor used by several ops receives
//!   one partial gradient per use (`grad/<op>/<input>`); each is added to the
//!   running sum as soon as it is produced (a chain of `add` ops
//!   `sum/<tensor>/<k>`, so partials die early in the schedule), the last sum
//!   is the total gradient `grad/<tensor>`, and the sums join the tensor's
//!   group.
//! * **Weight decay** ([`training_graph_with`], PyTorch's `weight_decay` of
//!   SGD and Adam: L2, coupled): per weight with a gradient, one more
//!   contribution `scale<alpha = weight_decay>(w)` named `decay/<w>`, summed
//!   into the total gradient like any other, so the update sees g + λ·w.
//! * **Update**: per weight with a gradient, one optimizer op in the weight's
//!   group: `sgd_update`, `momentum_update` (state: velocity) or
//!   `adam_update` (state: m and v), whose outputs replace the weight and the
//!   state in place ([`Tensor::updates`](super::Tensor::updates)).
//!
//! Groups: every backward op joins its forward op's group; every gradient
//! joins its forward tensor's group. Errors name the operator: an input that
//! needs a gradient without a declaration, a gradient of the wrong shape, a
//! missing spec.

use std::collections::HashMap;

/// Name prefix of the weight-decay operators (`decay/<w>`,
/// [`training_graph_with`]; [`Graph::set_weight_decay`](super::Graph::set_weight_decay) finds them by it).
pub const DECAY_PREFIX: &str = "decay/";

use tdl::{
    AttrValue, Attrs, BinOp, Binding, Builtin, Expr, ExprKind, GradArg, Library, TensorRef, Type,
    UnOp,
};

use super::build::{OpInserter, OutputMeta};
use super::error::GraphError;
use super::ids::TensorId;
use super::ir::{DType, Fill, Graph, Op, OpRole, Tensor, TensorRole};
use super::optimizer::Optimizer;

/// Build the training graph of `forward` (see the module doc).
///
/// Errors: [`GraphError::NoLoss`], [`GraphError::LossNotScalar`],
/// [`GraphError::UnknownSpec`], [`GraphError::NoGradient`],
/// [`GraphError::GradShape`], [`GraphError::GradAttr`], shape errors of
/// gradient ops.
pub fn training_graph(
    forward: &Graph,
    lib: &Library,
    optimizer: &Optimizer,
) -> Result<Graph, GraphError> {
    training_graph_with(forward, lib, optimizer, 0.0)
}

/// [`training_graph`] with L2 weight decay `weight_decay` (λ ≥ 0, PyTorch
/// SGD's and Adam's `weight_decay`): every trained weight's total gradient
/// gains the contribution λ·w (`decay/<w>`, a `scale` op) before its update.
/// λ = 0 adds nothing (the graph of [`training_graph`]).
///
/// Errors: those of [`training_graph`].
pub fn training_graph_with(
    forward: &Graph,
    lib: &Library,
    optimizer: &Optimizer,
    weight_decay: f64,
) -> Result<Graph, GraphError> {
    let loss = forward.loss().ok_or(GraphError::NoLoss)?;
    let lt = forward.tensor(loss);
    if !lt.shape.is_empty() {
        return Err(GraphError::LossNotScalar {
            name: lt.name.clone(),
            shape: lt.shape.clone(),
        });
    }
    let requires = requires_grad(forward);
    let mut pass = Backward {
        ins: OpInserter::new(lib, forward.clone()),
        contribs: HashMap::new(),
    };
    let seed = pass.ins.leaf(Tensor {
        name: format!("grad/{}", lt.name),
        shape: vec![],
        dtype: DType::F32,
        role: TensorRole::Gradient,
        group: lt.group,
        grad: None,
        grad_of: Some(loss),
        updates: None,
        fill: Some(Fill::Constant { value: 1.0 }),
        value: None,
        step: None,
    })?;
    pass.contribs.insert(
        loss,
        Partial {
            acc: seed,
            count: 1,
        },
    );
    let forward_ops: Vec<_> = forward.op_ids().collect();
    for &o in forward_ops.iter().rev() {
        let op = forward.op(o).clone();
        if !op.inputs.iter().any(|t| requires[t.index()])
            || op.outputs.iter().all(|t| !pass.contribs.contains_key(t))
        {
            continue;
        }
        pass.differentiate(forward, lib, &op, &requires)?;
    }
    // Weights (no producer): sum their gradients, then update them.
    let weights: Vec<TensorId> = forward
        .tensor_ids()
        .filter(|&t| forward.tensor(t).role == TensorRole::Weight && forward.producer(t).is_none())
        .collect();
    let mut updates = Vec::new();
    for w in weights {
        if pass.contribs.contains_key(&w) {
            if weight_decay != 0.0 {
                pass.decay(w, weight_decay)?;
            }
            let g = pass.total_or_zero(w)?;
            updates.push((w, g));
        }
    }
    for (w, g) in updates {
        pass.update(w, g, optimizer)?;
    }
    Ok(pass.ins.graph)
}

/// Which tensors of `forward` need a gradient (indexed by tensor): the
/// weights without a producer and everything computed from them.
fn requires_grad(forward: &Graph) -> Vec<bool> {
    let mut requires = vec![false; forward.tensors().len()];
    for (i, t) in forward.tensors().iter().enumerate() {
        requires[i] =
            t.role == TensorRole::Weight && forward.producer(TensorId(i as u32)).is_none();
    }
    for op in forward.ops() {
        if op.inputs.iter().any(|t| requires[t.index()]) {
            for t in &op.outputs {
                requires[t.index()] = true;
            }
        }
    }
    requires
}

impl Backward<'_> {
    /// Insert the backward ops of forward op `op` (its spec's `grad`
    /// declarations for the inputs that need a gradient) and accumulate
    /// their outputs into the inputs' gradient contributions.
    ///
    /// Errors: a declaration naming a temporary, an attribute that does not
    /// evaluate, a gradient whose shape is not its input's
    /// ([`GraphError::GradShape`]), an input that needs a gradient of a spec
    /// declaring none ([`GraphError::NoGradient`]).
    fn differentiate(
        &mut self,
        forward: &Graph,
        lib: &Library,
        op: &Op,
        requires: &[bool],
    ) -> Result<(), GraphError> {
        let (spec, binding) = forward.bind_op(lib, op)?;
        let mut covered = vec![false; op.inputs.len()];
        for decl in &spec.grads {
            if !decl
                .wrt
                .iter()
                .any(|&i| requires[op.inputs[i as usize].index()])
            {
                continue;
            }
            let mut args = Vec::with_capacity(decl.args.len());
            for a in &decl.args {
                args.push(match *a {
                    GradArg::Tensor(TensorRef::Input(i)) => op.inputs[i as usize],
                    GradArg::Tensor(TensorRef::Output(i)) => op.outputs[i as usize],
                    GradArg::Tensor(TensorRef::Local(_)) => {
                        return Err(GraphError::GradAttr {
                            op: op.name.clone(),
                            spec: decl.op.clone(),
                            attr: "(arguments)".into(),
                            message: "a gradient argument names a temporary".into(),
                        })
                    }
                    GradArg::OutputGrad(k) => self.total_or_zero(op.outputs[k as usize])?,
                });
            }
            let mut attrs = Attrs::new();
            for (name, e) in &decl.attrs {
                let v = const_eval(e, &binding).map_err(|message| GraphError::GradAttr {
                    op: op.name.clone(),
                    spec: decl.op.clone(),
                    attr: name.clone(),
                    message,
                })?;
                attrs.insert(name.clone(), v);
            }
            let wrt_names: Vec<&str> = decl
                .wrt
                .iter()
                .map(|&i| spec.inputs[i as usize].name.as_str())
                .collect();
            let targets: Vec<TensorId> = decl.wrt.iter().map(|&i| op.inputs[i as usize]).collect();
            let gname = format!("bwd/{}/{}", op.name, wrt_names.join(","));
            let (outs, _) = self.ins.insert(
                &decl.op,
                &gname,
                args,
                attrs,
                OpRole::Backward,
                op.group,
                |g, k, _| {
                    let t = g.tensor(targets[k]);
                    OutputMeta {
                        name: format!("grad/{}/{}", op.name, wrt_names[k]),
                        role: TensorRole::Gradient,
                        group: t.group,
                        grad_of: Some(targets[k]),
                    }
                },
            )?;
            for (k, &i) in decl.wrt.iter().enumerate() {
                let target = op.inputs[i as usize];
                covered[i as usize] = true;
                let want = &self.ins.graph.tensor(target).shape;
                let got = &self.ins.graph.tensor(outs[k]).shape;
                if want != got {
                    return Err(GraphError::GradShape {
                        op: gname,
                        spec: decl.op.clone(),
                        input: spec.inputs[i as usize].name.clone(),
                        expected: want.clone(),
                        got: got.clone(),
                    });
                }
                if requires[target.index()] {
                    self.accumulate(target, outs[k])?;
                }
            }
        }
        // An input without a `grad` declaration is not differentiable (TDL:
        // integer ids, `where`'s condition) when the spec declares gradients
        // for other inputs; a spec declaring none at all cannot be trained through.
        for (i, &t) in op.inputs.iter().enumerate() {
            if requires[t.index()] && !covered[i] && spec.grads.is_empty() {
                return Err(GraphError::NoGradient {
                    op: op.name.clone(),
                    spec: op.spec.clone(),
                    input: spec.inputs[i].name.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The running sum of a tensor's gradient contributions.
#[derive(Clone, Copy)]
struct Partial {
    /// The sum so far (the first contribution, or the last `add`'s output).
    acc: TensorId,
    /// Contributions summed into it.
    count: usize,
}

struct Backward<'l> {
    ins: OpInserter<'l>,
    /// Running sum of the gradient contributions received so far, per forward tensor.
    contribs: HashMap<TensorId, Partial>,
}

impl Backward<'_> {
    /// Add a gradient contribution `p` to `t`'s running sum: the first one is
    /// kept as is, each further one is added at once with an `add` op in
    /// `t`'s group (eager accumulation keeps partial gradients short-lived).
    fn accumulate(&mut self, t: TensorId, p: TensorId) -> Result<(), GraphError> {
        let Some(prev) = self.contribs.get(&t).copied() else {
            self.contribs.insert(t, Partial { acc: p, count: 1 });
            return Ok(());
        };
        let k = prev.count;
        let name = format!("sum/{}/{k}", self.ins.graph.tensor(t).name);
        let acc = self.gradient_op("add", &name, vec![prev.acc, p], Attrs::new(), t)?;
        self.contribs.insert(t, Partial { acc, count: k + 1 });
        Ok(())
    }

    /// One backward operator `name` of spec `spec` in `of`'s group whose one
    /// output (`<name>.out`) is a gradient of `of`.
    fn gradient_op(
        &mut self,
        spec: &str,
        name: &str,
        inputs: Vec<TensorId>,
        attrs: Attrs,
        of: TensorId,
    ) -> Result<TensorId, GraphError> {
        let group = self.ins.graph.tensor(of).group;
        let (o, _) = self.ins.insert(
            spec,
            name,
            inputs,
            attrs,
            OpRole::Backward,
            group,
            |_, _, _| OutputMeta {
                name: format!("{name}.out"),
                role: TensorRole::Gradient,
                group,
                grad_of: Some(of),
            },
        )?;
        Ok(o[0])
    }

    /// Weight decay: the contribution `decay/<w> = scale<alpha = λ>(w)` to
    /// `w`'s gradient, in `w`'s group.
    fn decay(&mut self, w: TensorId, lambda: f64) -> Result<(), GraphError> {
        let name = format!("{DECAY_PREFIX}{}", self.ins.graph.tensor(w).name);
        let mut attrs = Attrs::new();
        attrs.insert("alpha".to_string(), AttrValue::Float(lambda));
        let d = self.gradient_op("scale", &name, vec![w], attrs, w)?;
        self.accumulate(w, d)
    }

    /// The total gradient of `t` (named `grad/<t>` and linked from `t`): its
    /// accumulated contributions, or a zero tensor if it has none.
    fn total_or_zero(&mut self, t: TensorId) -> Result<TensorId, GraphError> {
        if let Some(g) = self.ins.graph.tensor(t).grad {
            return Ok(g);
        }
        let (name, group) = {
            let tt = self.ins.graph.tensor(t);
            (tt.name.clone(), tt.group)
        };
        let total_name = format!("grad/{name}");
        let total = match self.contribs.remove(&t) {
            None => {
                let attrs: Attrs = [("alpha".to_string(), AttrValue::Float(0.0))]
                    .into_iter()
                    .collect();
                let (o, _) = self.ins.insert(
                    "scale",
                    &format!("zero/{name}"),
                    vec![t],
                    attrs,
                    OpRole::Backward,
                    group,
                    |_, _, _| OutputMeta {
                        name: total_name.clone(),
                        role: TensorRole::Gradient,
                        group,
                        grad_of: Some(t),
                    },
                )?;
                o[0]
            }
            Some(Partial { acc, .. }) => {
                if self.ins.graph.tensor(acc).name != total_name {
                    self.ins.claim(&total_name)?;
                    self.ins.graph.tensor_mut(acc).name = total_name;
                }
                acc
            }
        };
        self.ins.graph.tensor_mut(t).grad = Some(total);
        Ok(total)
    }

    /// Append the optimizer update of weight `w` with total gradient `g`.
    fn update(&mut self, w: TensorId, g: TensorId, opt: &Optimizer) -> Result<(), GraphError> {
        let (name, shape, group) = {
            let t = self.ins.graph.tensor(w);
            (t.name.clone(), t.shape.clone(), t.group)
        };
        let mut inputs = vec![w, g];
        for s in opt.state_names() {
            inputs.push(self.ins.leaf(Tensor {
                name: format!("{name}.{s}"),
                shape: shape.clone(),
                dtype: DType::F32,
                role: TensorRole::OptimizerState,
                group,
                grad: None,
                grad_of: None,
                updates: None,
                fill: Some(Fill::Constant { value: 0.0 }),
                value: None,
                step: None,
            })?);
        }
        let replaced = {
            let mut r = vec![w];
            r.extend_from_slice(&inputs[2..]);
            r
        };
        let names: Vec<String> = replaced
            .iter()
            .map(|&t| format!("{}.new", self.ins.graph.tensor(t).name))
            .collect();
        let (outs, _) = self.ins.insert(
            opt.spec(),
            &format!("update/{name}"),
            inputs,
            opt.attrs(),
            OpRole::Update,
            group,
            |_, k, _| OutputMeta {
                name: names
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| format!("{name}.update{k}")),
                role: if k == 0 {
                    TensorRole::Weight
                } else {
                    TensorRole::OptimizerState
                },
                group,
                grad_of: None,
            },
        )?;
        for (o, r) in outs.into_iter().zip(replaced) {
            self.ins.graph.tensor_mut(o).updates = Some(r);
        }
        Ok(())
    }
}

/// Evaluate a gradient declaration's attribute expression (constants, the
/// forward op's dims and attributes, arithmetic, `min`/`max`).
fn const_eval(e: &Expr, b: &Binding) -> Result<AttrValue, String> {
    let v = eval(e, b)?;
    Ok(if e.ty == Type::Int {
        AttrValue::Int(v.round() as i64)
    } else {
        AttrValue::Float(v)
    })
}

fn eval(e: &Expr, b: &Binding) -> Result<f64, String> {
    Ok(match &e.kind {
        ExprKind::Int(i) => *i as f64,
        ExprKind::Real(r) => *r,
        ExprKind::Dim(d) => *b.dims.get(d.0 as usize).ok_or("unknown dim")? as f64,
        ExprKind::Attr(a) => b
            .attrs
            .get(a.0 as usize)
            .ok_or("unknown attribute")?
            .as_f64(),
        ExprKind::Unary(UnOp::Neg, a) => -eval(a, b)?,
        ExprKind::Unary(UnOp::Not, a) => (eval(a, b)? == 0.0) as i64 as f64,
        ExprKind::Binary(op, x, y) => {
            let (x, y) = (eval(x, b)?, eval(y, b)?);
            let int = e.ty == Type::Int;
            match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                BinOp::FloorDiv | BinOp::Mod if int && y == 0.0 => {
                    return Err("division by zero".into())
                }
                BinOp::FloorDiv => (x / y).floor(),
                BinOp::Mod => x - y * (x / y).floor(),
                BinOp::Lt => (x < y) as i64 as f64,
                BinOp::Le => (x <= y) as i64 as f64,
                BinOp::Gt => (x > y) as i64 as f64,
                BinOp::Ge => (x >= y) as i64 as f64,
                BinOp::Eq => (x == y) as i64 as f64,
                BinOp::Ne => (x != y) as i64 as f64,
                BinOp::And => (x != 0.0 && y != 0.0) as i64 as f64,
                BinOp::Or => (x != 0.0 || y != 0.0) as i64 as f64,
            }
        }
        ExprKind::Call(f, args) => {
            let a: Vec<f64> = args.iter().map(|x| eval(x, b)).collect::<Result<_, _>>()?;
            match (f, a.as_slice()) {
                (Builtin::Max, [x, y]) => x.max(*y),
                (Builtin::Min, [x, y]) => x.min(*y),
                (Builtin::Select, [c, x, y]) => {
                    if *c != 0.0 {
                        *x
                    } else {
                        *y
                    }
                }
                (Builtin::Sqrt, [x]) => x.sqrt(),
                (Builtin::Abs, [x]) => x.abs(),
                _ => {
                    return Err(format!(
                        "`{}` is not supported in a gradient attribute",
                        f.name()
                    ))
                }
            }
        }
        _ => {
            return Err(
                "only constants, dims and attributes may appear in a gradient attribute".into(),
            )
        }
    })
}
