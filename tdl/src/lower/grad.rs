//! Gradient declarations: `grad x = op(...);`.

use pest::iterators::Pair;

use super::{span_of, Lowerer, Rule, Scope};
use crate::ast::*;

impl Lowerer<'_> {
    pub(super) fn grad(&mut self, pair: Pair<Rule>) {
        let span = span_of(&pair);
        let mut wrt = Vec::new();
        let mut op = None;
        let mut args = Vec::new();
        let mut attrs = Vec::new();
        let mut names = Vec::new();
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::ident => names.push(p),
                Rule::grad_args => {
                    for a in p.into_inner() {
                        let Some(a) = a.into_inner().next() else {
                            continue;
                        };
                        let aspan = span_of(&a);
                        if a.as_rule() == Rule::grad_of {
                            let Some(n) = a.into_inner().find(|x| x.as_rule() == Rule::ident)
                            else {
                                continue;
                            };
                            match self.op.outputs.iter().position(|o| o.name == n.as_str()) {
                                Some(i) => args.push(GradArg::OutputGrad(i as u32)),
                                None => self.err(
                                    aspan,
                                    format!(
                                        "`grad({})`: `{}` is not an output of `{}`",
                                        n.as_str(),
                                        n.as_str(),
                                        self.op.name
                                    ),
                                    "not an output",
                                    Some("`grad(y)` names the gradient of an output `y`".into()),
                                ),
                            }
                        } else {
                            match self.lookup_tensor(a.as_str()) {
                                Some(TensorRef::Local(_)) | None => self.err(aspan, format!("unknown tensor `{}` in gradient arguments", a.as_str()), "not an input or output", Some("gradient ops take this op's inputs, outputs and `grad(output)`".into())),
                                Some(t) => args.push(GradArg::Tensor(t)),
                            }
                        }
                    }
                }
                Rule::attr_assigns => {
                    for a in p.into_inner() {
                        let mut it = a.into_inner();
                        let (Some(n), Some(v)) = (it.next(), it.next()) else {
                            continue;
                        };
                        if let Some(e) = self.expr(v, &Scope::default()) {
                            attrs.push((n.as_str().to_string(), e));
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(last) = names.pop() {
            op = Some(last.as_str().to_string());
        }
        for n in names {
            match self.op.inputs.iter().position(|t| t.name == n.as_str()) {
                Some(i) => wrt.push(i as u32),
                None => self.err(
                    span_of(&n),
                    format!(
                        "`grad {}`: `{}` is not an input of `{}`",
                        n.as_str(),
                        n.as_str(),
                        self.op.name
                    ),
                    "not an input",
                    Some("gradients are declared for inputs".into()),
                ),
            }
        }
        if let Some(op) = op {
            self.op.grads.push(GradDecl {
                wrt,
                op,
                args,
                attrs,
                span,
            });
        }
    }
}
