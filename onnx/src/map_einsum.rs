//! Einsum (ONNX opset 12+) → transposes, reshapes, `diagonal`,
//! `reduce_sum` and `matmul` / `batch_matmul`.
//!
//! Takes an equation as numpy.einsum reads it (ONNX Einsum spec): one term
//! per input (letters, at most one `...`), an optional `->` output (implicit
//! output: the ellipsis dims, then the letters that occur exactly once, in
//! ASCII order); size-1 dims broadcast against the other operands. Gives the
//! product as a chain of spec operators, so the interval analysis sees
//! matrix products (split on batch, row, column or contracted dims):
//!
//! 1. per operand: an index repeated in one term → `diagonal`
//!    (`specs/onnx_einsum.tdl`) until every index occurs once; a size-1 dim
//!    whose index is larger elsewhere is dropped (broadcast);
//! 2. operands are contracted left to right: indices no later term and not
//!    the output need are summed out first (`reduce_sum`), then both sides
//!    are permuted to `[batch.., kept.., contracted..]` /
//!    `[batch.., contracted.., kept..]`, viewed as `[batch.., M, K]` /
//!    `[batch.., K, N]` and multiplied (`matmul` without batch indices);
//! 3. the result is summed over indices the output lacks and permuted to the
//!    output order.
//!
//! Every step has its gradient in the library, so Einsum trains.
//! A zero-size index gives a constant (zeros; an empty output).

use std::collections::BTreeMap;

use graph::TensorId;

use crate::lower::{unsupported, LResult, Lower, NodeError, Out};
use crate::map_elementwise::input;
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::Data;

/// An index of the equation: a letter (its ASCII code) or the `j`-th
/// broadcast ellipsis dim (`ELLIPSIS + j`, ordered before the letters).
type Label = u32;

/// First label of the ellipsis dims (below every letter's code after the shift).
const ELLIPSIS: Label = 0;
/// Letters are shifted above every ellipsis label.
const LETTER: Label = 1 << 16;

/// A parsed equation: per input its terms (letters and the ellipsis position).
#[derive(Debug, Clone, PartialEq)]
pub struct Equation {
    /// Per input: labels before the ellipsis, and (if present) after it.
    pub inputs: Vec<Term>,
    /// The explicit output, if given (`->`).
    pub output: Option<Term>,
}

/// One term of an equation (`ab...c` → before `[a, b]`, after `Some([c])`).
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// Letters before the ellipsis (all of them when there is none).
    pub before: Vec<char>,
    /// Letters after the ellipsis; `None` without an ellipsis.
    pub after: Option<Vec<char>>,
}

impl Term {
    fn letters(&self) -> impl Iterator<Item = char> + '_ {
        self.before
            .iter()
            .chain(self.after.iter().flatten())
            .copied()
    }
}

/// Parse an Einsum equation (spaces are ignored).
///
/// Errors: a character other than a letter, `,`, `.`, `->`; a `.` that is
/// not part of `...`; two ellipses in one term; more than one `->`.
pub fn parse(equation: &str) -> Result<Equation, String> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let mut parts = eq.split("->");
    let lhs = parts.next().unwrap_or("");
    let rhs = parts.next();
    if parts.next().is_some() {
        return Err(format!("equation `{equation}` has more than one `->`"));
    }
    let term = |s: &str| -> Result<Term, String> {
        let mut pieces = s.split("...");
        let before = pieces.next().unwrap_or("");
        let after = pieces.next();
        if pieces.next().is_some() {
            return Err(format!("term `{s}` of `{equation}` has two ellipses"));
        }
        let letters = |p: &str| -> Result<Vec<char>, String> {
            p.chars()
                .map(|c| {
                    if c.is_ascii_alphabetic() {
                        Ok(c)
                    } else {
                        Err(format!(
                            "term `{s}` of `{equation}` holds `{c}`; terms are letters and at most one `...`"
                        ))
                    }
                })
                .collect()
        };
        Ok(Term {
            before: letters(before)?,
            after: after.map(letters).transpose()?,
        })
    };
    Ok(Equation {
        inputs: lhs.split(',').map(term).collect::<Result<_, _>>()?,
        output: rhs.map(term).transpose()?,
    })
}

/// An operand while it is being contracted: its tensor and the label of each dim.
struct Operand {
    t: TensorId,
    labels: Vec<Label>,
}

fn letter(c: char) -> Label {
    LETTER + c as Label
}

/// The labels of a term for an operand of rank `rank`, with `e_max`
/// broadcast ellipsis dims in all (right-aligned, as numpy broadcasts).
fn term_labels(term: &Term, rank: usize, e_max: usize) -> Vec<Label> {
    let mut out: Vec<Label> = term.before.iter().map(|&c| letter(c)).collect();
    if let Some(after) = &term.after {
        let e = rank - term.before.len() - after.len();
        out.extend((e_max - e..e_max).map(|j| ELLIPSIS + j as Label));
        out.extend(after.iter().map(|&c| letter(c)));
    }
    out
}

/// Lower an Einsum node (see the module doc).
///
/// Errors (unsupported uses): an equation that does not parse, a term whose
/// letters do not fit its operand's rank, extents of one index that neither
/// agree nor broadcast, an output index no input has or one listed twice.
pub fn einsum(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let text = n.attrs.string("equation", "");
    let eq = parse(&text).map_err(NodeError::Unsupported)?;
    if eq.inputs.len() != n.n_inputs() {
        return unsupported(format!(
            "equation `{text}` has {} terms for {} inputs",
            eq.inputs.len(),
            n.n_inputs()
        ));
    }
    let mut tensors = Vec::new();
    let mut shapes = Vec::new();
    for i in 0..eq.inputs.len() {
        let t = input(l, n, i)?;
        shapes.push(l.shape(t));
        tensors.push(t);
    }
    // Ellipsis ranks, and the number of broadcast ellipsis dims.
    let mut e_max = 0;
    for (term, s) in eq.inputs.iter().zip(&shapes) {
        let k = term.letters().count();
        let fits = if term.after.is_some() {
            s.len() >= k
        } else {
            s.len() == k
        };
        if !fits {
            return unsupported(format!(
                "term with {k} letters in `{text}` for an input of rank {}",
                s.len()
            ));
        }
        e_max = e_max.max(s.len() - k);
    }
    let labels: Vec<Vec<Label>> = eq
        .inputs
        .iter()
        .zip(&shapes)
        .map(|(term, s)| term_labels(term, s.len(), e_max))
        .collect();
    // Extent of every label (size-1 dims broadcast).
    let mut extent: BTreeMap<Label, usize> = BTreeMap::new();
    for (ls, s) in labels.iter().zip(&shapes) {
        for (&lab, &d) in ls.iter().zip(s) {
            let e = extent.entry(lab).or_insert(d);
            if *e == 1 {
                *e = d;
            } else if d != 1 && d != *e {
                return unsupported(format!(
                    "index {} of `{text}` has extents {} and {d}",
                    show(lab),
                    *e
                ));
            }
        }
    }
    let output = output_labels(&eq, &labels, e_max, &text)?;
    let out_shape: Vec<usize> = output.iter().map(|l| extent[l]).collect();
    if extent.values().any(|&d| d == 0) {
        let numel: usize = out_shape.iter().product();
        return Ok(vec![Out::C(Data {
            elem: l.elem_of(n.input(0).unwrap_or_default()),
            shape: out_shape,
            values: vec![0.0; numel],
        })]);
    }
    let mut ops = Vec::new();
    for ((t, ls), s) in tensors.into_iter().zip(labels).zip(&shapes) {
        let op = diagonals(l, Operand { t, labels: ls }, &extent, s)?;
        ops.push(op);
    }
    let mut acc = ops.remove(0);
    let mut rest = ops.into_iter().collect::<Vec<_>>();
    rest.reverse(); // pop from the end = left to right
    while let Some(b) = rest.pop() {
        let later: Vec<Label> = rest
            .iter()
            .flat_map(|o| o.labels.iter().copied())
            .chain(output.iter().copied())
            .collect();
        let keep_a: Vec<Label> = later.iter().chain(&b.labels).copied().collect();
        let keep_b: Vec<Label> = later.iter().chain(&acc.labels).copied().collect();
        let a = sum_out(l, acc, &keep_a, &extent)?;
        let b = sum_out(l, b, &keep_b, &extent)?;
        acc = contract(l, a, b, &later, &extent)?;
    }
    let acc = sum_out(l, acc, &output, &extent)?;
    let perm: Vec<usize> = output
        .iter()
        .map(|o| {
            acc.labels
                .iter()
                .position(|l| l == o)
                .expect("output label kept")
        })
        .collect();
    let mut y = l.permute(acc.t, &perm)?;
    if l.emitted() == 0 {
        y = l.emit1("identity", &[y], &[])?;
    }
    Ok(vec![Out::T(y)])
}

/// The output's labels: explicit, or numpy's implicit order.
fn output_labels(
    eq: &Equation,
    labels: &[Vec<Label>],
    e_max: usize,
    text: &str,
) -> LResult<Vec<Label>> {
    let ellipsis = (0..e_max).map(|j| ELLIPSIS + j as Label);
    let out: Vec<Label> = match &eq.output {
        Some(term) => {
            let mut out: Vec<Label> = term.before.iter().map(|&c| letter(c)).collect();
            if let Some(after) = &term.after {
                out.extend(ellipsis);
                out.extend(after.iter().map(|&c| letter(c)));
            }
            out
        }
        None => {
            let mut count: BTreeMap<Label, usize> = BTreeMap::new();
            for term in &eq.inputs {
                for c in term.letters() {
                    *count.entry(letter(c)).or_default() += 1;
                }
            }
            ellipsis
                .chain(count.into_iter().filter(|&(_, k)| k == 1).map(|(l, _)| l))
                .collect()
        }
    };
    for (i, o) in out.iter().enumerate() {
        if out[..i].contains(o) {
            return unsupported(format!(
                "output index {} of `{text}` is listed twice",
                show(*o)
            ));
        }
        if !labels.iter().any(|ls| ls.contains(o)) {
            return unsupported(format!(
                "output index {} of `{text}` is in no input",
                show(*o)
            ));
        }
    }
    Ok(out)
}

/// A label as the equation writes it.
fn show(l: Label) -> String {
    if l >= LETTER {
        char::from_u32(l - LETTER).map_or_else(|| "?".into(), |c| format!("`{c}`"))
    } else {
        format!("of the ellipsis (dim {l})")
    }
}

/// Take diagonals until every label occurs once, then drop broadcast size-1 dims.
fn diagonals(
    l: &mut Lower,
    mut op: Operand,
    extent: &BTreeMap<Label, usize>,
    shape: &[usize],
) -> LResult<Operand> {
    let mut shape = shape.to_vec();
    while let Some((p, q)) = repeated(&op.labels) {
        if shape[p] != shape[q] {
            return unsupported(format!(
                "repeated index {} spans dims of extents {} and {}",
                show(op.labels[p]),
                shape[p],
                shape[q]
            ));
        }
        let r = op.labels.len();
        let perm: Vec<usize> = (0..r).filter(|&d| d != p && d != q).chain([p, q]).collect();
        let t = l.permute(op.t, &perm)?;
        let t = l.emit1("diagonal", &[t], &[])?;
        let lab = op.labels[p];
        op.labels = perm[..r - 2].iter().map(|&d| op.labels[d]).collect();
        op.labels.push(lab);
        shape = l.shape(t);
        op.t = t;
    }
    let keep: Vec<usize> = (0..op.labels.len())
        .filter(|&d| !(shape[d] == 1 && extent[&op.labels[d]] != 1))
        .collect();
    if keep.len() < op.labels.len() {
        let to: Vec<usize> = keep.iter().map(|&d| shape[d]).collect();
        op.t = l.reshape(op.t, &to)?;
        op.labels = keep.iter().map(|&d| op.labels[d]).collect();
    }
    Ok(op)
}

/// The first pair of positions holding the same label.
fn repeated(labels: &[Label]) -> Option<(usize, usize)> {
    (0..labels.len()).find_map(|q| (0..q).find(|&p| labels[p] == labels[q]).map(|p| (p, q)))
}

/// Sum over the labels of `op` that `keep` lacks (`reduce_sum` over the
/// merged last dim); nothing is emitted when none is summed.
fn sum_out(
    l: &mut Lower,
    op: Operand,
    keep: &[Label],
    extent: &BTreeMap<Label, usize>,
) -> LResult<Operand> {
    let (kept, summed): (Vec<usize>, Vec<usize>) =
        (0..op.labels.len()).partition(|&d| keep.contains(&op.labels[d]));
    if summed.is_empty() {
        return Ok(op);
    }
    let perm: Vec<usize> = kept.iter().chain(&summed).copied().collect();
    let t = l.permute(op.t, &perm)?;
    let mut view: Vec<usize> = kept.iter().map(|&d| extent[&op.labels[d]]).collect();
    view.push(summed.iter().map(|&d| extent[&op.labels[d]]).product());
    let t = l.reshape(t, &view)?;
    let t = l.emit1("reduce_sum", &[t], &[])?;
    Ok(Operand {
        t,
        labels: kept.iter().map(|&d| op.labels[d]).collect(),
    })
}

/// Contract two operands whose every label is in the other or in `later`:
/// shared labels in `later` are batch dims, the other shared ones are summed
/// by the matrix product.
fn contract(
    l: &mut Lower,
    a: Operand,
    b: Operand,
    later: &[Label],
    extent: &BTreeMap<Label, usize>,
) -> LResult<Operand> {
    let shared = |x: &Label| b.labels.contains(x);
    let batch: Vec<Label> = a
        .labels
        .iter()
        .filter(|x| shared(x) && later.contains(x))
        .copied()
        .collect();
    let summed: Vec<Label> = a
        .labels
        .iter()
        .filter(|x| shared(x) && !later.contains(x))
        .copied()
        .collect();
    let a_only: Vec<Label> = a.labels.iter().filter(|x| !shared(x)).copied().collect();
    let b_only: Vec<Label> = b
        .labels
        .iter()
        .filter(|x| !a.labels.contains(x))
        .copied()
        .collect();
    let pos = |ls: &[Label], x: &Label| ls.iter().position(|y| y == x).expect("label present");
    let size = |ls: &[Label]| -> usize { ls.iter().map(|x| extent[x]).product() };
    let bsizes: Vec<usize> = batch.iter().map(|x| extent[x]).collect();
    let (m, k, nn) = (size(&a_only), size(&summed), size(&b_only));

    let perm_a: Vec<usize> = batch
        .iter()
        .chain(&a_only)
        .chain(&summed)
        .map(|x| pos(&a.labels, x))
        .collect();
    let ta = l.permute(a.t, &perm_a)?;
    let ta = l.reshape(ta, &[bsizes.clone(), vec![m, k]].concat())?;
    let perm_b: Vec<usize> = batch
        .iter()
        .chain(&summed)
        .chain(&b_only)
        .map(|x| pos(&b.labels, x))
        .collect();
    let tb = l.permute(b.t, &perm_b)?;
    let tb = l.reshape(tb, &[bsizes.clone(), vec![k, nn]].concat())?;
    let spec = if batch.is_empty() {
        "matmul"
    } else {
        "batch_matmul"
    };
    let c = l.emit1(spec, &[ta, tb], &[])?;
    let labels: Vec<Label> = batch
        .iter()
        .chain(&a_only)
        .chain(&b_only)
        .copied()
        .collect();
    let shape: Vec<usize> = labels.iter().map(|x| extent[x]).collect();
    let t = l.reshape(c, &shape)?;
    Ok(Operand { t, labels })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ellipsis_implicit_output_and_spaces() {
        let eq = parse("...ij, ...jk").unwrap();
        assert_eq!(eq.inputs.len(), 2);
        assert_eq!(eq.inputs[0].before, Vec::<char>::new());
        assert_eq!(eq.inputs[0].after, Some(vec!['i', 'j']));
        assert_eq!(eq.output, None);
        let eq = parse("ii->i").unwrap();
        assert_eq!(eq.inputs[0].before, vec!['i', 'i']);
        assert_eq!(eq.output.unwrap().before, vec!['i']);
    }

    #[test]
    fn rejects_what_is_not_an_equation() {
        assert!(parse("i.j->ij").is_err());
        assert!(parse("i...j...->ij").is_err());
        assert!(parse("ij->j->i").is_err());
        assert!(parse("i1->i").is_err());
    }
}
