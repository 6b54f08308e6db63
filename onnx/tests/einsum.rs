//! Einsum imports every equation form ONNX allows and computes what a
//! brute-force einsum computes (the oracle: every assignment of every index,
//! products summed into the output, size-1 dims broadcast), and trains
//! (its lowering has gradients). Cases beyond ONNX's six node tests:
//! implicit outputs, diagonals, sums, transposes, outer products, three
//! operands, ellipses with broadcasting.

mod common;

use std::collections::BTreeMap;

use common::models::{model, node, vi};
use onnx::{Data, Elem};
use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, GraphProto, TensorProto, ValueInfoProto};
use planner::graph::execute::{execute, Values};
use planner::graph::OpRole;

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

/// Deterministic test values.
fn values(n: usize, seed: usize) -> Vec<f64> {
    (0..n)
        .map(|i| (((i * 7 + seed * 13) % 11) as f64 - 5.0) / 4.0)
        .collect()
}

/// The oracle: `eq` written with letters only and an explicit output
/// (`"xij,jk->xik"`); a size-1 operand dim broadcasts.
fn brute_force(eq: &str, inputs: &[Data]) -> Data {
    let (lhs, rhs) = eq.split_once("->").unwrap();
    let terms: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
    let out: Vec<char> = rhs.chars().collect();
    let mut extent: BTreeMap<char, usize> = BTreeMap::new();
    for (t, d) in terms.iter().zip(inputs) {
        for (c, &s) in t.iter().zip(&d.shape) {
            let e = extent.entry(*c).or_insert(s);
            *e = (*e).max(s);
        }
    }
    let labels: Vec<char> = extent.keys().copied().collect();
    let out_shape: Vec<usize> = out.iter().map(|c| extent[c]).collect();
    let mut y = vec![0.0; out_shape.iter().product()];
    let total: usize = labels.iter().map(|c| extent[c]).product();
    for mut flat in 0..total {
        let mut at: BTreeMap<char, usize> = BTreeMap::new();
        for c in labels.iter().rev() {
            at.insert(*c, flat % extent[c]);
            flat /= extent[c];
        }
        let offset = |t: &[char], shape: &[usize]| {
            t.iter()
                .zip(shape)
                .fold(0, |o, (c, &s)| o * s + at[c].min(s - 1))
        };
        let p: f64 = terms
            .iter()
            .zip(inputs)
            .map(|(t, d)| d.values[offset(t, &d.shape)])
            .product();
        y[offset(&out, &out_shape)] += p;
    }
    Data {
        elem: Elem::F64,
        shape: out_shape,
        values: y,
    }
}

fn string_attr(name: &str, v: &str) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::STRING.into();
    a.s = v.as_bytes().to_vec();
    a
}

/// A one-node model `y = Einsum(x0, x1, ..)`; with `weight`, `x0` is a float
/// initializer (a parameter of a training graph) instead of an input.
fn einsum_model(eq: &str, shapes: &[&[usize]], weight: Option<&Data>) -> onnx::proto::Model {
    let names: Vec<String> = (0..shapes.len()).map(|i| format!("x{i}")).collect();
    let mut g = GraphProto::new();
    g.name = "einsum".into();
    for (i, (n, s)) in names.iter().zip(shapes).enumerate() {
        let dims: Vec<i64> = s.iter().map(|&d| d as i64).collect();
        match weight {
            Some(w) if i == 0 => {
                let mut t = TensorProto::new();
                t.name = n.clone();
                t.data_type = 1;
                t.dims = dims;
                t.float_data = w.values.iter().map(|&v| v as f32).collect();
                g.initializer.push(t);
            }
            _ => g.input.push(vi(n, 1, &dims)),
        }
    }
    let ins: Vec<&str> = names.iter().map(String::as_str).collect();
    g.node = vec![node(
        "Einsum",
        &ins,
        &["y"],
        vec![string_attr("equation", eq)],
    )];
    let mut y = ValueInfoProto::new();
    y.name = "y".into();
    g.output.push(y);
    model(g)
}

/// Import `eq` on inputs of `shapes`, run it with the interpreter and
/// compare with the oracle equation; then import it for training.
fn check(eq: &str, oracle: &str, shapes: &[&[usize]]) {
    let m = einsum_model(eq, shapes, None);
    let inputs: Vec<Data> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| Data {
            elem: Elem::F32,
            shape: s.to_vec(),
            values: values(s.iter().product(), i),
        })
        .collect();
    let mut opts = onnx::Options::default();
    for (i, d) in inputs.iter().enumerate() {
        opts.input_shapes.insert(format!("x{i}"), d.shape.clone());
        opts.input_values.insert(format!("x{i}"), d.clone());
    }
    let path = std::path::Path::new("einsum.onnx");
    let imported = onnx::import(&m, path, library(), &opts)
        .unwrap_or_else(|e| panic!("`{eq}` {shapes:?}: {e}"));
    let mut vals = Values::new(imported.graph.tensors().len());
    for (t, k) in &imported.leaf_values {
        let d = k.data().unwrap();
        vals.set(
            *t,
            tdl::Tensor {
                shape: d.shape,
                data: d.values,
            },
        );
    }
    execute(&imported.graph, &imported.library, &mut vals, |_, _| true)
        .unwrap_or_else(|e| panic!("`{eq}`: {e}"));
    let got = match &imported.outputs[0].1 {
        onnx::Output::Tensor(t) => vals.get(*t).expect("computed").clone(),
        onnx::Output::Const(d) => tdl::Tensor {
            shape: d.shape.clone(),
            data: d.values.clone(),
        },
    };
    let want = brute_force(oracle, &inputs);
    assert_eq!(got.shape, want.shape, "`{eq}` {shapes:?}: shape");
    for (i, (a, b)) in got.data.iter().zip(&want.values).enumerate() {
        assert!(
            (a - b).abs() <= 1e-9 * b.abs().max(1.0),
            "`{eq}` {shapes:?}: element {i}: got {a}, oracle {b}"
        );
    }
    if want.shape.iter().product::<usize>() == 0 {
        return;
    }
    // Training with x0 a parameter: its gradient flows through the lowering.
    let mut train = onnx::Options {
        training: true,
        input_values: BTreeMap::new(),
        ..opts
    };
    train.input_shapes.remove("x0");
    let m = einsum_model(eq, shapes, Some(&inputs[0]));
    let t = onnx::import(&m, path, library(), &train)
        .unwrap_or_else(|e| panic!("`{eq}` training: {e}"));
    assert!(
        t.graph.ops().iter().any(|o| o.role == OpRole::Backward),
        "`{eq}`: no backward operators"
    );
}

#[test]
fn matrix_products_transposes_and_batches() {
    check("ij,jk->ik", "ij,jk->ik", &[&[2, 3], &[3, 4]]);
    check("ij,jk", "ij,jk->ik", &[&[2, 3], &[3, 4]]);
    check("bij,bjk->bik", "bij,bjk->bik", &[&[2, 3, 4], &[2, 4, 5]]);
    check("ij->ji", "ij->ji", &[&[3, 4]]);
    check("ba", "ba->ab", &[&[3, 4]]);
    check("ij,kj->ik", "ij,kj->ik", &[&[2, 3], &[4, 3]]);
    check(
        "bhqd,bhkd->bhqk",
        "bhqd,bhkd->bhqk",
        &[&[2, 2, 3, 4], &[2, 2, 5, 4]],
    );
    check("abc,cd->dba", "abc,cd->dba", &[&[2, 3, 4], &[4, 5]]);
}

#[test]
fn sums_products_and_outer_products() {
    check("i,i", "i,i->", &[&[5], &[5]]);
    check("ij->i", "ij->i", &[&[3, 4]]);
    check("ij->", "ij->", &[&[3, 4]]);
    check("->", "->", &[&[]]);
    check("i,j->ij", "i,j->ij", &[&[3], &[4]]);
    check("ij,ij->ij", "ij,ij->ij", &[&[3, 4], &[3, 4]]);
    check("ijk,jl->il", "ijk,jl->il", &[&[2, 3, 4], &[3, 2]]);
    check("ij,jk,kl->il", "ij,jk,kl->il", &[&[2, 3], &[3, 4], &[4, 2]]);
    check("i,i,i->", "i,i,i->", &[&[4], &[4], &[4]]);
}

#[test]
fn diagonals() {
    check("ii->i", "ii->i", &[&[4, 4]]);
    check("ii", "ii->", &[&[4, 4]]);
    check("...ii->...i", "xii->xi", &[&[3, 5, 5]]);
    check("iij->j", "iij->j", &[&[3, 3, 2]]);
    check("ijij->ij", "ijij->ij", &[&[2, 3, 2, 3]]);
    check("iii->i", "iii->i", &[&[3, 3, 3]]);
    check("ii,ij->j", "ii,ij->j", &[&[3, 3], &[3, 2]]);
}

#[test]
fn ellipses_broadcast() {
    check(
        "...ij,...jk->...ik",
        "xij,xjk->xik",
        &[&[2, 3, 4], &[2, 4, 5]],
    );
    check(
        "...ij,...jk",
        "xyij,yjk->xyik",
        &[&[2, 3, 2, 4], &[3, 4, 5]],
    );
    check(
        "...ij,...jk->...ik",
        "xyij,xyjk->xyik",
        &[&[2, 1, 2, 3], &[1, 4, 3, 2]],
    );
    check("i...,i...->...", "ixy,ixy->xy", &[&[3, 2, 2], &[3, 2, 2]]);
    check("...i,...i", "xi,xi->x", &[&[4, 3], &[4, 3]]);
    check("a...b->b...a", "axyb->bxya", &[&[2, 3, 4, 5]]);
    check("...->", "xy->", &[&[2, 3]]);
}

#[test]
fn bad_equations_are_errors() {
    for (eq, shapes) in [
        ("ij,jk->ik", &[&[2usize, 3][..], &[4, 5][..]][..]),
        ("ij->k", &[&[2, 3][..]][..]),
        ("ijk->i", &[&[2, 3][..]][..]),
        ("ij->ii", &[&[2, 3][..]][..]),
        ("i.j->i", &[&[2, 3][..]][..]),
        ("ij,jk->ik", &[&[2, 3][..]][..]),
        ("ii->i", &[&[2, 3][..]][..]),
    ] {
        let m = einsum_model(eq, shapes, None);
        let mut opts = onnx::Options::default();
        for (i, s) in shapes.iter().enumerate() {
            opts.input_shapes.insert(format!("x{i}"), s.to_vec());
        }
        let e = onnx::import(&m, std::path::Path::new("bad.onnx"), library(), &opts)
            .err()
            .unwrap_or_else(|| panic!("`{eq}` {shapes:?} imported"));
        assert!(e.to_string().contains("Einsum"), "`{eq}`: {e}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, ..Default::default() })]

    /// Any equation text and any input shapes: an import, or an error
    /// naming the node, never a panic.
    #[test]
    fn any_equation_imports_or_is_an_error(
        eq in "[ijk.,> -]{0,12}",
        shapes in proptest::collection::vec(proptest::collection::vec(0usize..4, 0..4), 1..4),
    ) {
        let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
        let m = einsum_model(&eq, &refs, None);
        let mut opts = onnx::Options::default();
        for (i, s) in shapes.iter().enumerate() {
            opts.input_shapes.insert(format!("x{i}"), s.clone());
        }
        if let Err(e) = onnx::import(&m, std::path::Path::new("any.onnx"), library(), &opts) {
            proptest::prop_assert!(e.to_string().contains("Einsum"), "{e}");
        }
    }
}
