//! ONNX LSTM, GRU and RNN (issue 15 item 4), unrolled over time into TDL
//! operators: every attribute and optional input against an independent
//! scalar reference written from the ONNX operator docs (per element, per
//! time step, per batch row; `sequence_lens` as onnxruntime runs it), run
//! through the importer and the TDL interpreter on random configurations;
//! an LSTM imported for training whose time steps carry step metadata, are
//! coalesced by the planner's coarsening and plan at k = 4; a dynamic
//! sequence dim names the input and the `--input-shape` flag.

mod common;

use std::path::Path;

use common::models::{attr, floats, recurrent, A};
use interval::cache::StrategyCache;
use onnx::{Options, Output};
use planner::graph::execute::{execute, Values};
use planner::graph::OpRole;
use planner::plan::coarsen::coarsen;
use planner::plan::model::Model;
use planner::plan::{plan, SearchKind};
use proptest::prelude::*;

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

/// One activation with its parameters (α, β as the function takes them).
#[derive(Clone, Debug)]
struct Act {
    name: &'static str,
    params: Vec<f64>,
}

fn act(a: &Act, x: f64) -> f64 {
    let p = |i: usize| a.params[i];
    match a.name {
        "Relu" => x.max(0.0),
        "Tanh" => x.tanh(),
        "Sigmoid" => 1.0 / (1.0 + (-x).exp()),
        "Affine" => p(0) * x + p(1),
        "LeakyRelu" => {
            if x >= 0.0 {
                x
            } else {
                p(0) * x
            }
        }
        "ThresholdedRelu" => {
            if x > p(0) {
                x
            } else {
                0.0
            }
        }
        "ScaledTanh" => p(0) * (p(1) * x).tanh(),
        "HardSigmoid" => (p(0) * x + p(1)).clamp(0.0, 1.0),
        "Elu" => {
            if x >= 0.0 {
                x
            } else {
                p(0) * (x.exp() - 1.0)
            }
        }
        "Softsign" => x / (1.0 + x.abs()),
        "Softplus" => (1.0 + x.exp()).ln(),
        other => panic!("unknown activation {other}"),
    }
}

/// A random configuration.
#[derive(Clone, Debug)]
struct Case {
    op: &'static str,
    dir: &'static str,
    layout: i64,
    s: usize,
    b: usize,
    i: usize,
    h: usize,
    bias: bool,
    init_h: bool,
    init_c: bool,
    peep: bool,
    lens: Option<Vec<usize>>,
    /// `sequence_lens` is a graph input unknown at import (fed at run time).
    lens_at_run_time: bool,
    clip: Option<f64>,
    input_forget: bool,
    lbr: bool,
    /// Per direction, per slot (None: the defaults, no attribute).
    acts: Option<Vec<Act>>,
    seed: u64,
}

impl Case {
    fn dirs(&self) -> usize {
        if self.dir == "bidirectional" {
            2
        } else {
            1
        }
    }
    fn gates(&self) -> usize {
        match self.op {
            "LSTM" => 4,
            "GRU" => 3,
            _ => 1,
        }
    }
    fn slots(&self) -> usize {
        match self.op {
            "LSTM" => 3,
            "GRU" => 2,
            _ => 1,
        }
    }
    fn default_acts(&self) -> Vec<Act> {
        let names: &[&str] = match self.op {
            "LSTM" => &["Sigmoid", "Tanh", "Tanh"],
            "GRU" => &["Sigmoid", "Tanh"],
            _ => &["Tanh"],
        };
        let one: Vec<Act> = names
            .iter()
            .map(|&name| Act {
                name,
                params: vec![],
            })
            .collect();
        (0..self.dirs()).flat_map(|_| one.clone()).collect()
    }
}

/// Deterministic values in [-1, 1), rounded to f32.
fn values(seed: &mut u64, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((*seed >> 33) as f64 / (1u64 << 31) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

/// The inputs of a case (layout-independent arrays, flat row-major).
struct Inputs {
    /// x[t][b][i]
    x: Vec<f32>,
    w: Vec<f32>,
    r: Vec<f32>,
    bias: Vec<f32>,
    h0: Vec<f32>,
    c0: Vec<f32>,
    p: Vec<f32>,
}

fn inputs(c: &Case) -> Inputs {
    let (d, g, h) = (c.dirs(), c.gates(), c.h);
    let mut seed = c.seed;
    let mut v = |n| values(&mut seed, n);
    Inputs {
        x: v(c.s * c.b * c.i),
        w: v(d * g * h * c.i),
        r: v(d * g * h * h),
        bias: v(d * 2 * g * h),
        h0: v(d * c.b * h),
        c0: v(d * c.b * h),
        p: v(d * 3 * h),
    }
}

/// The scalar reference: (Y [S, D, B, H], Y_h [D, B, H], Y_c [D, B, H]) in
/// layout 0 order. Indexed loops, as the equations read.
#[allow(clippy::needless_range_loop)]
fn reference(c: &Case, inp: &Inputs) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (s, bn, ni, h, d, g) = (c.s, c.b, c.i, c.h, c.dirs(), c.gates());
    let acts = c.acts.clone().unwrap_or_else(|| c.default_acts());
    let clip = |v: f64| c.clip.map_or(v, |t| v.clamp(-t, t));
    let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let (x, w, r, bias) = (f64s(&inp.x), f64s(&inp.w), f64s(&inp.r), f64s(&inp.bias));
    let (h0, c0, p) = (f64s(&inp.h0), f64s(&inp.c0), f64s(&inp.p));
    let mut y = vec![0.0; s * d * bn * h];
    let mut yh = vec![0.0; d * bn * h];
    let mut yc = vec![0.0; d * bn * h];
    for di in 0..d {
        let a = &acts[di * c.slots()..(di + 1) * c.slots()];
        let reverse = c.dir == "reverse" || di == 1;
        for b in 0..bn {
            let len = c.lens.as_ref().map_or(s, |l| l[b]);
            let mut hs: Vec<f64> = (0..h)
                .map(|j| {
                    if c.init_h {
                        h0[(di * bn + b) * h + j]
                    } else {
                        0.0
                    }
                })
                .collect();
            let mut cs: Vec<f64> = (0..h)
                .map(|j| {
                    if c.init_c {
                        c0[(di * bn + b) * h + j]
                    } else {
                        0.0
                    }
                })
                .collect();
            let times: Vec<usize> = if reverse {
                (0..len).rev().collect()
            } else {
                (0..len).collect()
            };
            for t in times {
                let xt = &x[(t * bn + b) * ni..(t * bn + b + 1) * ni];
                // Row `row` of W·x, of R·v, and the two biases.
                let wx = |row: usize| -> f64 {
                    (0..ni)
                        .map(|k| w[(di * g * h + row) * ni + k] * xt[k])
                        .sum()
                };
                let rv = |row: usize, v: &[f64]| -> f64 {
                    (0..h).map(|k| r[(di * g * h + row) * h + k] * v[k]).sum()
                };
                let wb = |row: usize| {
                    if c.bias {
                        bias[di * 2 * g * h + row]
                    } else {
                        0.0
                    }
                };
                let rb = |row: usize| {
                    if c.bias {
                        bias[di * 2 * g * h + g * h + row]
                    } else {
                        0.0
                    }
                };
                let pre = |gate: usize, j: usize, v: &[f64]| {
                    let row = gate * h + j;
                    wx(row) + rv(row, v) + wb(row) + rb(row)
                };
                let peep = |k: usize, j: usize| {
                    if c.peep {
                        p[di * 3 * h + k * h + j]
                    } else {
                        0.0
                    }
                };
                let mut hn = vec![0.0; h];
                let mut cn = vec![0.0; h];
                match c.op {
                    "RNN" => {
                        for j in 0..h {
                            hn[j] = act(&a[0], clip(pre(0, j, &hs)));
                        }
                    }
                    "LSTM" => {
                        for j in 0..h {
                            let ig = act(&a[0], clip(pre(0, j, &hs) + peep(0, j) * cs[j]));
                            let fg = if c.input_forget {
                                1.0 - ig
                            } else {
                                act(&a[0], clip(pre(2, j, &hs) + peep(2, j) * cs[j]))
                            };
                            let cc = act(&a[1], clip(pre(3, j, &hs)));
                            cn[j] = fg * cs[j] + ig * cc;
                            let og = act(&a[0], clip(pre(1, j, &hs) + peep(1, j) * cn[j]));
                            hn[j] = og * act(&a[2], cn[j]);
                        }
                    }
                    _ => {
                        let z: Vec<f64> =
                            (0..h).map(|j| act(&a[0], clip(pre(0, j, &hs)))).collect();
                        let rg: Vec<f64> =
                            (0..h).map(|j| act(&a[0], clip(pre(1, j, &hs)))).collect();
                        let rh: Vec<f64> = (0..h).map(|j| rg[j] * hs[j]).collect();
                        for j in 0..h {
                            let row = 2 * h + j;
                            let nn = if c.lbr {
                                wx(row) + wb(row) + rg[j] * (rv(row, &hs) + rb(row))
                            } else {
                                wx(row) + rv(row, &rh) + rb(row) + wb(row)
                            };
                            let nn = act(&a[1], clip(nn));
                            hn[j] = (1.0 - z[j]) * nn + z[j] * hs[j];
                        }
                    }
                }
                for j in 0..h {
                    y[((t * d + di) * bn + b) * h + j] = hn[j];
                }
                hs = hn;
                cs = cn;
            }
            for j in 0..h {
                yh[(di * bn + b) * h + j] = hs[j];
                yc[(di * bn + b) * h + j] = cs[j];
            }
        }
    }
    (y, yh, yc)
}

/// Permute a row-major array of `shape` by `perm` (output dim k = input dim perm[k]).
fn permute(v: &[f64], shape: &[usize], perm: &[usize]) -> Vec<f64> {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let n: usize = shape.iter().product();
    let mut out = vec![0.0; n];
    for (o, slot) in out.iter_mut().enumerate() {
        let mut rem = o;
        let mut idx = vec![0; shape.len()];
        for k in (0..out_shape.len()).rev() {
            idx[perm[k]] = rem % out_shape[k];
            rem /= out_shape[k];
        }
        let src = idx.iter().zip(shape).fold(0, |a, (&i, &d)| a * d + i);
        *slot = v[src];
    }
    out
}

/// The model of a case, with its input values.
fn build(c: &Case, inp: &Inputs, training_weights: bool) -> (onnx::proto::Model, Options) {
    let (s, bn, ni, h, d, g) = (c.s, c.b, c.i, c.h, c.dirs(), c.gates());
    let (s_, b_, i_, h_, d_) = (s as i64, bn as i64, ni as i64, h as i64, d as i64);
    let x = if c.layout == 1 {
        let f: Vec<f64> = inp.x.iter().map(|&v| v as f64).collect();
        permute(&f, &[s, bn, ni], &[1, 0, 2])
            .into_iter()
            .map(|v| v as f32)
            .collect()
    } else {
        inp.x.clone()
    };
    let state = |v: &[f32]| -> Vec<f32> {
        if c.layout == 1 {
            let f: Vec<f64> = v.iter().map(|&x| x as f64).collect();
            permute(&f, &[d, bn, h], &[1, 0, 2])
                .into_iter()
                .map(|v| v as f32)
                .collect()
        } else {
            v.to_vec()
        }
    };
    let xdims = if c.layout == 1 {
        vec![b_, s_, i_]
    } else {
        vec![s_, b_, i_]
    };
    let sdims = if c.layout == 1 {
        vec![b_, d_, h_]
    } else {
        vec![d_, b_, h_]
    };
    let g_ = g as i64;
    let mut slots: Vec<(&str, Vec<i64>, Vec<f32>)> = vec![
        ("X", xdims, x),
        ("W", vec![d_, g_ * h_, i_], inp.w.clone()),
        ("R", vec![d_, g_ * h_, h_], inp.r.clone()),
        ("", vec![], vec![]),
        ("", vec![], vec![]),
        ("", vec![], vec![]),
        ("", vec![], vec![]),
        ("", vec![], vec![]),
    ];
    if c.bias {
        slots[3] = ("B", vec![d_, 2 * g_ * h_], inp.bias.clone());
    }
    if let Some(l) = &c.lens {
        slots[4] = (
            "sequence_lens",
            vec![b_],
            l.iter().map(|&v| v as f32).collect(),
        );
    }
    if c.init_h {
        slots[5] = ("initial_h", sdims.clone(), state(&inp.h0));
    }
    if c.init_c {
        slots[6] = ("initial_c", sdims, state(&inp.c0));
    }
    if c.peep {
        slots[7] = ("P", vec![d_, 3 * h_], inp.p.clone());
    }
    while slots.last().is_some_and(|s| s.0.is_empty()) {
        slots.pop();
    }
    let mut attrs = vec![
        attr("hidden_size", A::I(h_)),
        attr("direction", A::S(c.dir)),
    ];
    if c.layout != 0 {
        attrs.push(attr("layout", A::I(c.layout)));
    }
    if let Some(t) = c.clip {
        attrs.push(attr("clip", A::F(t as f32)));
    }
    if c.input_forget {
        attrs.push(attr("input_forget", A::I(1)));
    }
    if c.lbr {
        attrs.push(attr("linear_before_reset", A::I(1)));
    }
    if let Some(acts) = &c.acts {
        let names: Vec<&str> = acts.iter().map(|a| a.name).collect();
        let alphas: Vec<f32> = acts
            .iter()
            .filter_map(|a| a.params.first().map(|&v| v as f32))
            .collect();
        let betas: Vec<f32> = acts
            .iter()
            .filter_map(|a| a.params.get(1).map(|&v| v as f32))
            .collect();
        attrs.push(attr("activations", A::Ss(&names)));
        attrs.push(attr("activation_alpha", A::Fs(&alphas)));
        attrs.push(attr("activation_beta", A::Fs(&betas)));
    }
    let outputs: &[&str] = if c.op == "LSTM" {
        &["Y", "Y_h", "Y_c"]
    } else {
        &["Y", "Y_h"]
    };
    let weights = if training_weights {
        slots
            .iter()
            .filter(|s| matches!(s.0, "W" | "R" | "B" | "P"))
            .map(|s| floats(s.0, &s.1, &s.2))
            .collect()
    } else {
        vec![]
    };
    let shape_slots: Vec<(&str, Vec<i64>)> = slots.iter().map(|s| (s.0, s.1.clone())).collect();
    let m = recurrent(c.op, &shape_slots, weights, attrs, outputs);
    let mut opts = Options::default();
    for (name, dims, v) in &slots {
        if name.is_empty() || (training_weights && matches!(*name, "W" | "R" | "B" | "P")) {
            continue;
        }
        let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        let mut data = onnx::Data::floats(shape.clone(), v.iter().map(|&x| x as f64).collect());
        if *name == "sequence_lens" {
            data.elem = onnx::Elem::Int(32);
        }
        opts.input_shapes.insert(name.to_string(), shape);
        if !(*name == "sequence_lens" && c.lens_at_run_time) {
            opts.input_values.insert(name.to_string(), data);
        }
    }
    (m, opts)
}

/// Import and run a case; compare every output with the reference.
fn check(c: &Case) -> Result<(), String> {
    let inp = inputs(c);
    let (m, opts) = build(c, &inp, false);
    let imp =
        onnx::import(&m, Path::new("rnn.onnx"), library(), &opts).map_err(|e| e.to_string())?;
    let graph = &imp.graph;
    let mut vals = Values::new(graph.tensors().len());
    for (t, k) in &imp.leaf_values {
        let d = k.data()?;
        vals.set(
            *t,
            tdl::Tensor {
                shape: k.shape.clone(),
                data: d.values,
            },
        );
    }
    if let (Some(lens), true) = (&c.lens, c.lens_at_run_time) {
        let t = graph
            .tensor_by_name("sequence_lens")
            .ok_or("sequence_lens is not a graph tensor")?;
        let data = lens.iter().map(|&v| v as f64).collect();
        vals.set(
            t,
            tdl::Tensor {
                shape: vec![lens.len()],
                data,
            },
        );
    }
    execute(graph, &imp.library, &mut vals, |_, _| true).map_err(|e| e.to_string())?;
    let (y, yh, yc) = reference(c, &inp);
    let (s, bn, h, d) = (c.s, c.b, c.h, c.dirs());
    let (y, yh, yc, ys, hs) = if c.layout == 1 {
        (
            permute(&y, &[s, d, bn, h], &[2, 0, 1, 3]),
            permute(&yh, &[d, bn, h], &[1, 0, 2]),
            permute(&yc, &[d, bn, h], &[1, 0, 2]),
            vec![bn, s, d, h],
            vec![bn, d, h],
        )
    } else {
        (y, yh, yc, vec![s, d, bn, h], vec![d, bn, h])
    };
    let want = [("Y", y, ys), ("Y_h", yh, hs.clone()), ("Y_c", yc, hs)];
    for (name, out) in &imp.outputs {
        let Output::Tensor(t) = out else {
            return Err(format!("{name} folded"));
        };
        let got = vals.get(*t).ok_or(format!("{name} not computed"))?;
        let (_, exp, shape) = want.iter().find(|w| w.0 == name).expect("known output");
        if &got.shape != shape {
            return Err(format!("{name}: shape {:?}, want {shape:?}", got.shape));
        }
        for (k, (a, e)) in got.data.iter().zip(exp).enumerate() {
            if (a - e).abs() > 1e-5 * (1.0 + e.abs()) {
                return Err(format!("{name}[{k}]: got {a}, want {e}"));
            }
        }
    }
    Ok(())
}

const ACTS: &[(&str, usize)] = &[
    ("Relu", 0),
    ("Tanh", 0),
    ("Sigmoid", 0),
    ("Affine", 2),
    ("LeakyRelu", 1),
    ("ThresholdedRelu", 1),
    ("ScaledTanh", 2),
    ("HardSigmoid", 2),
    ("Elu", 1),
    ("Softsign", 0),
    ("Softplus", 0),
];

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        (
            0usize..3,
            0usize..3,
            0i64..2,
            1usize..4,
            1usize..4,
            1usize..3,
            1usize..4,
        ),
        (any::<[bool; 7]>(), any::<u64>()),
        proptest::collection::vec((0usize..ACTS.len(), 0.25f64..1.5, -0.5f64..0.5), 6),
        proptest::collection::vec(0usize..4, 3),
    )
        .prop_map(|((op, dir, layout, s, b, i, h), (f, seed), acts, lens)| {
            let op = ["LSTM", "GRU", "RNN"][op];
            let dir = ["forward", "reverse", "bidirectional"][dir];
            let mut c = Case {
                op,
                dir,
                layout,
                s,
                b,
                i,
                h,
                bias: f[0],
                init_h: f[1],
                init_c: f[2] && op == "LSTM",
                peep: f[3] && op == "LSTM",
                lens: f[4].then(|| lens[..b].iter().map(|&l| l.min(s)).collect()),
                lens_at_run_time: seed % 5 < 2,
                clip: f[5].then_some(0.75),
                input_forget: f[6] && op == "LSTM" && seed % 2 == 0,
                lbr: f[6] && op == "GRU",
                acts: None,
                seed,
            };
            if seed % 3 == 0 {
                let n = c.slots() * c.dirs();
                c.acts = Some(
                    acts[..n]
                        .iter()
                        .map(|&(k, a, b)| Act {
                            name: ACTS[k].0,
                            params: [a, b][..ACTS[k].1].to_vec(),
                        })
                        .collect(),
                );
            }
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every attribute and optional input, on random small configurations,
    /// equals the scalar reference.
    #[test]
    fn unrolled_cells_equal_the_scalar_reference(c in case_strategy()) {
        check(&c).map_err(|e| TestCaseError::fail(format!("{e}\n{c:?}")))?;
    }
}

fn base(op: &'static str) -> Case {
    Case {
        op,
        dir: "forward",
        layout: 0,
        s: 3,
        b: 2,
        i: 2,
        h: 3,
        bias: true,
        init_h: true,
        init_c: op == "LSTM",
        peep: false,
        lens: None,
        lens_at_run_time: false,
        clip: None,
        input_forget: false,
        lbr: false,
        acts: None,
        seed: 7,
    }
}

#[test]
fn named_cases_equal_the_scalar_reference() {
    let mut cases = Vec::new();
    for op in ["LSTM", "GRU", "RNN"] {
        for dir in ["forward", "reverse", "bidirectional"] {
            cases.push(Case {
                dir,
                lens: Some(vec![3, 1]),
                ..base(op)
            });
            cases.push(Case {
                dir,
                lens: Some(vec![0, 2]),
                lens_at_run_time: true,
                ..base(op)
            });
            cases.push(Case {
                dir,
                layout: 1,
                ..base(op)
            });
        }
    }
    cases.push(Case {
        peep: true,
        clip: Some(0.5),
        input_forget: true,
        ..base("LSTM")
    });
    cases.push(Case {
        lbr: true,
        dir: "bidirectional",
        ..base("GRU")
    });
    // clip = inf (ONNX allows it): no clipping.
    cases.push(Case {
        clip: Some(f64::INFINITY),
        ..base("LSTM")
    });
    let all: Vec<Act> = ACTS
        .iter()
        .map(|&(name, n)| Act {
            name,
            params: [0.7, 0.2][..n].to_vec(),
        })
        .collect();
    for a in all.chunks(1) {
        cases.push(Case {
            acts: Some(a.to_vec()),
            ..base("RNN")
        });
    }
    for c in &cases {
        check(c).unwrap_or_else(|e| panic!("{e}\n{c:?}"));
    }
}

#[test]
fn bad_attributes_and_shapes_are_errors() {
    let c = base("LSTM");
    let inp = inputs(&c);
    let (m, opts) = build(&c, &inp, false);
    let mutate = |f: &dyn Fn(&mut onnx_protobuf::NodeProto)| {
        let mut m = m.clone();
        f(&mut m.proto.graph.as_mut().unwrap().node[0]);
        onnx::import(&m, Path::new("rnn.onnx"), library(), &opts)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let set = |name: &'static str, a: A<'static>| {
        move |n: &mut onnx_protobuf::NodeProto| {
            n.attribute.retain(|x| x.name != name);
            n.attribute.push(attr(name, a_clone(&a)));
        }
    };
    for (f, want) in [
        (
            Box::new(set("direction", A::S("sideways"))) as Box<dyn Fn(&mut _)>,
            "direction = \"sideways\"",
        ),
        (Box::new(set("layout", A::I(2))), "layout = 2"),
        (Box::new(set("hidden_size", A::I(5))), "hidden_size = 5"),
        (Box::new(set("clip", A::F(-1.0))), "clip = -1"),
        (
            Box::new(set("activations", A::Ss(&["Sigmoid", "Gelu", "Tanh"]))),
            "activation `gelu`",
        ),
        (
            Box::new(set("activations", A::Ss(&["Sigmoid"]))),
            "lists 1 functions",
        ),
        (
            Box::new(set("direction", A::S("bidirectional"))),
            "do not fit 2 direction(s)",
        ),
    ] {
        let e = mutate(&*f);
        assert!(e.contains(want), "want `{want}` in: {e}");
        assert!(e.contains("lstm_0"), "names the node: {e}");
    }
}

fn a_clone(a: &A<'static>) -> A<'static> {
    match a {
        A::I(v) => A::I(*v),
        A::F(v) => A::F(*v),
        A::S(v) => A::S(v),
        A::Ss(v) => A::Ss(v),
        A::Fs(v) => A::Fs(v),
    }
}

#[test]
fn a_dynamic_sequence_dim_names_the_input_and_the_flag() {
    // Batch-first X [2, ?, 3]: the unrolled length is an unnamed dynamic dim.
    let m = recurrent(
        "LSTM",
        &[
            ("X", vec![2, 5, 3]),
            ("W", vec![1, 8, 3]),
            ("R", vec![1, 8, 2]),
        ],
        vec![
            floats("W", &[1, 8, 3], &[0.1; 24]),
            floats("R", &[1, 8, 2], &[0.1; 16]),
        ],
        vec![attr("hidden_size", A::I(2)), attr("layout", A::I(1))],
        &["Y"],
    );
    let mut g = m.proto.clone();
    let x = &mut g.graph.as_mut().unwrap().input[0];
    let dims = &mut x
        .type_
        .as_mut()
        .unwrap()
        .mut_tensor_type()
        .shape
        .as_mut()
        .unwrap()
        .dim;
    dims[1] = onnx_protobuf::tensor_shape_proto::Dimension::new();
    let m = onnx::proto::decode(&onnx::synth::to_bytes(&g), Path::new("lstm.onnx")).unwrap();
    let e = onnx::import(&m, Path::new("lstm.onnx"), library(), &Options::default())
        .err()
        .expect("the sequence length is needed")
        .to_string();
    assert!(e.contains("input `X`"), "{e}");
    assert!(e.contains("--input-shape X=2,D1,3"), "{e}");
    let opts = Options {
        input_shapes: [("X".to_string(), vec![2, 4, 3])].into(),
        ..Default::default()
    };
    let imp = onnx::import(&m, Path::new("lstm.onnx"), library(), &opts).unwrap();
    assert_eq!(imp.summary.mapped.get("LSTM"), Some(&1));
    let steps: std::collections::BTreeSet<u32> =
        imp.graph.ops().iter().filter_map(|o| o.step).collect();
    assert_eq!(steps, (0..4).collect(), "one step per time step");
}

/// A bidirectional LSTM with trainable W, R, B and run-time sequence
/// lengths imported for training: every forward op
/// of the time steps carries its step, every step has the same ops, the
/// coarsening puts the k-th op of every step in one slot, and it plans at
/// k = 4.
#[test]
fn an_lstm_trains_is_coarsened_by_time_step_and_plans_at_k4() {
    let c = Case {
        s: 4,
        b: 4,
        i: 6,
        h: 8,
        dir: "bidirectional",
        lens: Some(vec![4, 2, 3, 1]),
        lens_at_run_time: true,
        ..base("LSTM")
    };
    let inp = inputs(&c);
    let (m, mut opts) = build(&c, &inp, true);
    opts.training = true;
    // X and the initial states are run-time inputs (random at planning).
    opts.input_values.clear();
    let imp = onnx::import(&m, Path::new("lstm.onnx"), library(), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let graph = &imp.graph;
    assert!(graph.ops().iter().any(|o| o.role == OpRole::Backward));
    let mut per_step = vec![Vec::new(); c.s];
    for o in graph.ops() {
        if let Some(s) = o.step {
            assert_eq!(o.role, OpRole::Forward, "op `{}`", o.name);
            per_step[s as usize].push(o.spec.clone());
        }
    }
    assert!(per_step[0].len() >= 2 * 12, "{:?}", per_step[0]);
    assert!(per_step.iter().all(|s| s == &per_step[0]), "{per_step:?}");
    for w in ["W", "R", "B"] {
        let t = graph.tensor_by_name(w).expect("weight tensor");
        assert_eq!(graph.tensor(t).step, None, "{w}");
    }
    // Coarsening: a slot holding one op of every step.
    let cache = StrategyCache::new();
    let clusters = coarsen(graph, &Model::new(graph, &imp.library, &cache).unwrap());
    let every_step = |slot: &[planner::graph::OpId]| {
        let mut s: Vec<Option<u32>> = slot.iter().map(|&o| graph.op(o).step).collect();
        s.sort();
        s == (0..c.s as u32).map(Some).collect::<Vec<_>>()
    };
    let coalesced = clusters
        .iter()
        .flat_map(|cl| &cl.op_slots)
        .filter(|s| every_step(s))
        .count();
    assert!(
        coalesced >= per_step[0].len() / 2,
        "only {coalesced} of {} step ops are coalesced across steps",
        per_step[0].len()
    );
    // Plans at k = 4.
    let planned = plan(graph, &imp.library, &cache, 4, SearchKind::CriticalDp)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(planned.factors.iter().product::<usize>(), 4);
    assert_eq!(planned.memory.len(), 4);
    println!(
        "{} ops ({} per time step, {coalesced} slots hold one op of every step), \
         {} clusters; plan at k = 4: {} bytes moved",
        graph.ops().len(),
        per_step[0].len(),
        clusters.len(),
        planned.comm_bytes
    );
}
