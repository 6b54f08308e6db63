//! The padded-read operators on random windows (issue 45, item 3): `pad`
//! (constant), `pad_edge`, `pad_reflect`, `pad_wrap`, their gradients
//! (`slice`, `pad_*_grad`), `pad2d` and `crop2d`, on random shapes, pads and
//! shares of their index space (a random sub-box, or one part of an even
//! partition, of each variable that is not reduced). Each share runs in the
//! compiled CPU evaluator with input buffers holding exactly the regions the
//! planner's access model says the share reads
//! (`planner::plan::access::OpAccess::input_region`, what a rank is given),
//! and must equal the TDL interpreter's whole output restricted to the
//! share's output box.
//!
//! Negative controls (checked by hand, issue 45): with the window mapping
//! broken — the compiled evaluator's local offset of an input read shifted
//! by one (`runner/src/ops/layout.rs`, `window_layouts`: `lo` of each input
//! region taken one less) — the test fails on its first cases; with the
//! planner's old rule (an empty read site empties the input's whole dim,
//! `OpAccess::input_region`) it fails on one-sided pads of the gradients.

use std::collections::BTreeMap;

use planner::plan::access::OpAccess;
use proptest::prelude::*;
use runner::{Registry, Window};
use tdl::{AttrValue, Attrs, Library, Tensor};

fn lib() -> &'static Library {
    static LIB: std::sync::OnceLock<Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| Library::shipped().expect("shipped specs load"))
}

/// The padded-read operators under test.
const OPS: &[&str] = &[
    "pad",
    "slice",
    "pad_edge",
    "pad_edge_grad",
    "pad_reflect",
    "pad_reflect_grad",
    "pad_wrap",
    "pad_wrap_grad",
    "pad2d",
    "crop2d",
];

/// One random instance: the operator, its lead dims, the padded axis's
/// length, the pads, and per variable how to cut its range.
#[derive(Clone, Debug)]
struct Case {
    op: &'static str,
    lead: Vec<usize>,
    n: usize,
    before: usize,
    after: usize,
    cuts: Vec<(u8, u8, bool)>,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        0..OPS.len(),
        prop::collection::vec(1usize..4, 0..3),
        1usize..8,
        0usize..4,
        0usize..4,
        prop::collection::vec((any::<u8>(), any::<u8>(), any::<bool>()), 6),
        any::<u64>(),
    )
        .prop_map(|(op, lead, n, before, after, cuts, seed)| Case {
            op: OPS[op],
            lead,
            n,
            before,
            after,
            cuts,
            seed,
        })
}

/// Input shapes and attributes of `c`'s operator (pads made valid: reflect
/// pads below n, a crop that leaves something).
fn bind_args(c: &Case) -> (Vec<Vec<usize>>, Attrs) {
    let int = |v: usize| AttrValue::Int(v as i64);
    let (mut before, mut after, n) = (c.before, c.after, c.n);
    if c.op.starts_with("pad_reflect") {
        before %= n;
        after %= n;
    }
    let with = |last: usize| {
        let mut s = c.lead.clone();
        s.push(last);
        s
    };
    let mut attrs: Attrs = BTreeMap::new();
    let shapes = match c.op {
        "pad" | "pad_edge" | "pad_reflect" | "pad_wrap" => {
            attrs.insert("before".into(), int(before));
            attrs.insert("after".into(), int(after));
            if c.op == "pad" {
                attrs.insert("value".into(), AttrValue::Float(0.5));
            }
            vec![with(n)]
        }
        "slice" => {
            attrs.insert("start".into(), int(before));
            attrs.insert("end".into(), int(before + n));
            vec![with(before + n + after)]
        }
        "pad2d" | "crop2d" => {
            let (h, w) = (n + 1, c.lead.first().copied().unwrap_or(1) + 2);
            let (ph, pw) = (before.min(2), after.min(2));
            attrs.insert("pad_h".into(), int(ph));
            attrs.insert("pad_w".into(), int(pw));
            if c.op == "crop2d" {
                vec![vec![2, 1, h + 2 * ph, w + 2 * pw]]
            } else {
                vec![vec![2, 1, h, w]]
            }
        }
        // The gradients: dy of the padded length.
        _ => {
            attrs.insert("before".into(), int(before));
            attrs.insert("n".into(), int(n));
            vec![with(before + n + after)]
        }
    };
    (shapes, attrs)
}

/// The share of `c`: each variable cut as `c.cuts` says (a sub-box or one
/// part of an even partition), unless cutting it would make the output a
/// partial sum (a reduced variable stays whole).
fn share(c: &Case, access: &OpAccess, whole: &Window) -> Vec<(i64, i64)> {
    let mut vars = whole.vars.clone();
    for (v, &(a, b, part)) in c.cuts.iter().enumerate().take(vars.len()) {
        let (lo, hi) = whole.vars[v];
        let len = hi - lo;
        if len <= 1 {
            continue;
        }
        let cut = if part {
            let k = 1 + i64::from(a) % len.min(4);
            let p = i64::from(b) % k;
            (lo + p * len / k, lo + (p + 1) * len / k)
        } else {
            let l = lo + i64::from(a) % len;
            (l, l + 1 + i64::from(b) % (hi - l))
        };
        let keep = vars[v];
        vars[v] = cut;
        if access.output_region(0, &vars).1 {
            vars[v] = keep;
        }
    }
    vars
}

/// The elements of `region` of a row-major tensor of `shape`.
fn restrict(data: &[f64], shape: &[usize], region: &[(i64, i64)]) -> Vec<f64> {
    let mut out = Vec::new();
    if region.iter().any(|&(l, h)| h <= l) {
        return out;
    }
    let mut idx: Vec<i64> = region.iter().map(|r| r.0).collect();
    loop {
        let flat = idx
            .iter()
            .zip(shape)
            .fold(0usize, |acc, (&i, &n)| acc * n + i as usize);
        out.push(data[flat]);
        let mut d = idx.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < region[d].1 {
                break;
            }
            idx[d] = region[d].0;
        }
    }
}

/// Run `c`'s share in the compiled evaluator and compare it with the
/// interpreter; a message on a difference.
fn check(c: &Case) -> Result<(), String> {
    let spec = lib().get(c.op).expect("shipped op");
    let (shapes, attrs) = bind_args(c);
    let b = spec
        .bind(&shapes, &attrs)
        .map_err(|e| format!("bind: {e}"))?;
    let whole = Window::whole(&b)?;
    let access = OpAccess::new(&b);
    let vars = share(c, &access, &whole);
    let regions: Vec<Vec<(i64, i64)>> = (0..shapes.len())
        .map(|i| access.input_region(i, &vars).0)
        .collect();
    let inputs: Vec<Vec<f64>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            (0..s.iter().product::<usize>())
                .map(|j| {
                    let h = (j as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ c.seed ^ i as u64;
                    (h % 2001) as f64 / 1000.0 - 1.0
                })
                .collect()
        })
        .collect();
    let tensors: Vec<Tensor> = inputs
        .iter()
        .zip(&shapes)
        .map(|(v, s)| Tensor::new(s, v.clone()).expect("sizes"))
        .collect();
    let want = tdl::evaluate(spec, &tensors, &attrs).map_err(|e| format!("interpreter: {e}"))?;
    let (out_region, partial) = access.output_region(0, &vars);
    assert!(!partial, "shares keep reduced variables whole");
    let want = restrict(&want[0].data, &want[0].shape, &out_region.0);
    let bufs: Vec<Vec<f32>> = inputs
        .iter()
        .zip(&shapes)
        .zip(&regions)
        .map(|((v, s), r)| restrict(v, s, r).iter().map(|&x| x as f32).collect())
        .collect();
    let window = Window {
        vars: vars.clone(),
        inputs: regions.clone(),
    };
    let k = Registry::empty()
        .prepare_window(spec, &shapes, &attrs, &window)
        .map_err(|e| format!("prepare: {e}"))?;
    let mut y = vec![f32::NAN; want.len()];
    let ins: Vec<&[f32]> = bufs.iter().map(|v| &v[..]).collect();
    k.run(&ins, &mut [&mut y])
        .map_err(|e| format!("run (share {vars:?}, input regions {regions:?}): {e}"))?;
    for (j, (&g, &w)) in y.iter().zip(&want).enumerate() {
        if (f64::from(g) - w).abs() > 1e-5 * (1.0 + w.abs()) {
            return Err(format!(
                "element {j} of the share {vars:?} (output box {:?}, input regions {regions:?}): {g} vs {w}",
                out_region.0
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn padded_reads_on_random_shares_match_the_interpreter(c in case()) {
        let (shapes, attrs) = bind_args(&c);
        if let Err(e) = check(&c) {
            prop_assert!(false, "{} {shapes:?} {attrs:?}: {e}", c.op);
        }
    }
}

/// Every operator with pads of 0 on one side, each part of a 2-way and a
/// 3-way partition of every variable (fixed cases of what the property
/// test draws at random).
#[test]
fn one_sided_pads_on_every_part() {
    for &op in OPS {
        for (before, after) in [(0, 2), (2, 0), (0, 0), (1, 3)] {
            for (k, p) in [(2, 0), (2, 1), (3, 0), (3, 1), (3, 2)] {
                let c = Case {
                    op,
                    lead: vec![2],
                    n: 5,
                    before,
                    after,
                    cuts: vec![(k - 1, p, true); 6],
                    seed: 7,
                };
                if let Err(e) = check(&c) {
                    panic!("{op} before {before} after {after} part {p}/{k}: {e}");
                }
            }
        }
    }
}
