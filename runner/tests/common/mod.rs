//! Shared harness of the kernel tests: random op instances whose reference
//! result `tdl::evaluate` (the interpreter, f64) can compute, and the
//! comparison of a kernel's f32 result against it.
//!
//! Data-driven: shapes come from the spec's dims (random sizes, random
//! ellipsis rank), required attributes get random values, and input values
//! come from domains chosen from the spec itself: inputs read inside an index
//! expression (`table[ids[b], d]`) or compared with one (`ids[t] == v`) get
//! valid integer ids, arguments of
//! `cholesky` get symmetric positive-definite matrices, and other inputs try
//! uniform [-1, 1], then [0.5, 2] (log, sqrt), then [1.1, 3] (acosh) until the
//! reference is finite.
#![allow(dead_code)]

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runner::{OpKernel, Provider, Registry, Window};
use tdl::{
    AttrType, AttrValue, Attrs, Binding, DimEntry, DimExpr, Expr, ExprKind, Index, Library, OpSpec,
    Tensor, TensorRef,
};

/// A sampled op instance with its reference result.
pub struct Case {
    /// Input shapes.
    pub shapes: Vec<Vec<usize>>,
    /// Attribute values given (required ones and randomised ones).
    pub attrs: Attrs,
    /// Input values (f32-representable).
    pub inputs: Vec<Vec<f32>>,
    /// The interpreter's outputs.
    pub reference: Vec<Tensor>,
}

/// How to fill an input.
#[derive(Clone, Copy, Debug)]
enum Domain {
    Uniform(f32, f32),
    /// Integers in 0..n.
    Ids(usize),
    /// Symmetric positive-definite in the last two dims.
    Spd,
}

/// Inputs read inside index expressions or compared for equality with an
/// index, and inputs passed to `cholesky`.
fn special_inputs(spec: &OpSpec) -> (BTreeSet<u32>, BTreeSet<u32>) {
    fn reads(e: &Expr, out: &mut BTreeSet<u32>) {
        e.visit(&mut |x| {
            if let ExprKind::Read {
                tensor: TensorRef::Input(i),
                ..
            } = &x.kind
            {
                out.insert(*i);
            }
        });
    }
    let mut ids = BTreeSet::new();
    let mut spd = BTreeSet::new();
    for s in &spec.stmts {
        s.body.visit(&mut |x| match &x.kind {
            ExprKind::Read { indices, .. } => {
                for i in indices {
                    if let Index::Expr(ix) = i {
                        reads(ix, &mut ids);
                    }
                }
            }
            // `ids[...] == v` with `v` an index (embedding_grad, one_hot):
            // ids that match some rows, not floats that match none.
            ExprKind::Binary(tdl::BinOp::Eq, a, b) => {
                for (x, y) in [(a, b), (b, a)] {
                    if let ExprKind::Read {
                        tensor: TensorRef::Input(i),
                        ..
                    } = &x.kind
                    {
                        if y.ty == tdl::Type::Int {
                            ids.insert(*i);
                        }
                    }
                }
            }
            ExprKind::Opaque { name, args, .. } if name == "cholesky" => {
                for a in args {
                    if let ExprKind::Read {
                        tensor: TensorRef::Input(i),
                        ..
                    } = &a.kind
                    {
                        spd.insert(*i);
                    }
                }
            }
            _ => {}
        });
    }
    (ids, spd)
}

fn fill(rng: &mut StdRng, shape: &[usize], d: Domain) -> Vec<f32> {
    let n: usize = shape.iter().product();
    match d {
        Domain::Uniform(lo, hi) => (0..n).map(|_| rng.gen_range(lo..hi)).collect(),
        Domain::Ids(m) => (0..n).map(|_| rng.gen_range(0..m.max(1)) as f32).collect(),
        Domain::Spd => {
            let k = shape.last().copied().unwrap_or(1);
            let mut out = Vec::with_capacity(n);
            for _ in 0..n / (k * k).max(1) {
                let m: Vec<f32> = (0..k * k).map(|_| rng.gen_range(-1.0..1.0)).collect();
                for i in 0..k {
                    for j in 0..k {
                        let s: f32 = (0..k).map(|t| m[i * k + t] * m[j * k + t]).sum();
                        out.push(s + if i == j { k as f32 } else { 0.0 });
                    }
                }
            }
            out.resize(n, 1.0);
            out
        }
    }
}

/// Names of attributes that are randomised even though they have a default.
const SHAPE_ATTRS: &[&str] = &[
    "stride",
    "pad",
    "dilation",
    "stride_h",
    "stride_w",
    "pad_h",
    "pad_w",
    "dilation_h",
    "dilation_w",
];

/// Sample an instance of `spec` whose reference result exists and is finite;
/// dims in `1..=max_dim`; `None` if 200 tries fail (with the last reason).
pub fn sample(
    spec: &OpSpec,
    rng: &mut StdRng,
    max_dim: usize,
    max_elems: usize,
) -> Result<Case, String> {
    let (ids, spd) = special_inputs(spec);
    let mut last = String::from("no try");
    for attempt in 0..200 {
        let rank = if spec.has_ellipsis() {
            rng.gen_range(0..=2)
        } else {
            0
        };
        let ex = spec.expand_ellipsis(rank);
        let dims: Vec<usize> = (0..ex.dims.len())
            .map(|_| rng.gen_range(1..=max_dim))
            .collect();
        let shapes: Vec<Vec<usize>> = ex
            .inputs
            .iter()
            .map(|t| {
                t.dims
                    .iter()
                    .map(|d| match d {
                        DimEntry::Dim(DimExpr::Dim(id)) => dims[id.0 as usize],
                        _ => 1,
                    })
                    .collect()
            })
            .collect();
        let mut attrs = Attrs::new();
        for a in &spec.attrs {
            let randomise =
                a.default.is_none() || (SHAPE_ATTRS.contains(&a.name.as_str()) && attempt % 2 == 1);
            if !randomise {
                continue;
            }
            let v = match a.ty {
                AttrType::Int if a.name.starts_with("pad") => AttrValue::Int(rng.gen_range(0..=2)),
                AttrType::Int => AttrValue::Int(rng.gen_range(1..=3)),
                AttrType::Float => AttrValue::Float(rng.gen_range(0.1..0.9)),
            };
            attrs.insert(a.name.clone(), v);
        }
        let binding = match spec.bind(&shapes, &attrs) {
            Ok(b) => b,
            Err(e) => {
                last = e.to_string();
                continue;
            }
        };
        let out_elems: usize = binding
            .output_shapes
            .iter()
            .map(|s| s.iter().product::<usize>())
            .sum();
        if out_elems > max_elems {
            last = format!("outputs too large ({out_elems} elements)");
            continue;
        }
        let min_dim = shapes.iter().flatten().copied().min().unwrap_or(1);
        for plan in [
            Domain::Uniform(-1.0, 1.0),
            Domain::Uniform(0.5, 2.0),
            Domain::Uniform(1.1, 3.0),
        ] {
            let inputs: Vec<Vec<f32>> = shapes
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let d = if ids.contains(&(i as u32)) {
                        Domain::Ids(min_dim)
                    } else if spd.contains(&(i as u32)) {
                        Domain::Spd
                    } else {
                        plan
                    };
                    fill(rng, s, d)
                })
                .collect();
            let tensors: Vec<Tensor> = inputs
                .iter()
                .zip(&shapes)
                .map(|(v, s)| Tensor::new(s, v.iter().map(|&x| x as f64).collect()).expect("sizes"))
                .collect();
            match tdl::evaluate(spec, &tensors, &attrs) {
                Ok(out) if out.iter().all(|t| t.data.iter().all(|x| x.is_finite())) => {
                    return Ok(Case {
                        shapes,
                        attrs,
                        inputs,
                        reference: out,
                    });
                }
                Ok(_) => last = format!("non-finite reference with inputs in {plan:?}"),
                Err(e) => {
                    last = e.to_string();
                    break;
                }
            }
        }
    }
    Err(format!(
        "`{}`: no valid random instance in 200 tries; last: {last}",
        spec.name
    ))
}

/// Prepare and run a kernel on a case; gives the kernel and its f32 outputs.
pub fn run(
    registry: &Registry,
    spec: &OpSpec,
    case: &Case,
) -> Result<(OpKernel, Vec<Vec<f32>>), String> {
    let k = registry
        .prepare(spec, &case.shapes, &case.attrs)
        .map_err(|e| e.to_string())?;
    let mut outs: Vec<Vec<f32>> = k
        .output_shapes()
        .iter()
        .map(|s| vec![f32::NAN; s.iter().product()])
        .collect();
    let ins: Vec<&[f32]> = case.inputs.iter().map(|v| &v[..]).collect();
    let mut outs_m: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
    k.run(&ins, &mut outs_m).map_err(|e| e.to_string())?;
    Ok((k, outs))
}

/// As many outputs as the reference, each with as many elements; else a
/// message naming `op` and the output.
pub fn same_lengths(op: &str, got: &[Vec<f32>], want: &[Tensor]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "`{op}`: {} outputs, reference has {}",
            got.len(),
            want.len()
        ));
    }
    for (o, (g, w)) in got.iter().zip(want).enumerate() {
        if g.len() != w.data.len() {
            return Err(format!(
                "`{op}` output {o}: {} elements, reference has {}",
                g.len(),
                w.data.len()
            ));
        }
    }
    Ok(())
}

/// Check f32 results against the f64 reference: every element within
/// 1e-4 relative, where "relative" is to |want| plus 1% of the tensor's
/// largest magnitude (so entries that cancel to ~0 are judged on the
/// tensor's scale); a reference beyond f32's range must be the same-signed
/// infinity. Gives the largest such error.
pub fn compare(op: &str, got: &[Vec<f32>], want: &[Tensor], tol: f64) -> Result<f64, String> {
    same_lengths(op, got, want)?;
    let mut worst: f64 = 0.0;
    for (o, (g, w)) in got.iter().zip(want).enumerate() {
        // Values beyond f32's range (sentinels such as -1e300 for an empty
        // max window) are ±inf in f32; they do not set the scale.
        let f32_max = f32::MAX as f64;
        let scale = w
            .data
            .iter()
            .filter(|x| x.abs() <= f32_max)
            .fold(0.0f64, |m, x| m.max(x.abs()));
        for (i, (&a, &b)) in g.iter().zip(&w.data).enumerate() {
            if b.abs() > f32_max && a.is_infinite() && (a > 0.0) == (b > 0.0) {
                continue;
            }
            let err = (a as f64 - b).abs() / (b.abs() + 1e-2 * scale + 1e-30);
            let err = if (a as f64 - b).abs() < 1e-12 {
                0.0
            } else {
                err
            };
            worst = worst.max(err);
            if err > tol || err.is_nan() {
                return Err(format!(
                    "`{op}` output {o} (shape {:?}) element {i}: got {a}, reference {b} (relative error {err:.3e})",
                    w.shape
                ));
            }
        }
    }
    Ok(worst)
}

/// Run one case on any backend: upload the inputs, prepare and launch the
/// op, download the outputs (after a synchronisation).
#[allow(dead_code)]
pub fn run_on<B: runner::Backend>(
    backend: &B,
    spec: &OpSpec,
    case: &Case,
) -> Result<Vec<Vec<f32>>, String> {
    let k = backend
        .prepare(spec, &case.shapes, &case.attrs)
        .map_err(|e| e.to_string())?;
    let b = spec
        .bind(&case.shapes, &case.attrs)
        .map_err(|e| e.to_string())?;
    let ins: Vec<B::Buffer> = case
        .inputs
        .iter()
        .map(|v| backend.upload(v))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut outs: Vec<B::Buffer> = b
        .output_shapes
        .iter()
        .map(|s| backend.alloc(s.iter().product()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    {
        let i: Vec<&B::Buffer> = ins.iter().collect();
        let mut o: Vec<&mut B::Buffer> = outs.iter_mut().collect();
        backend.launch(&k, &i, &mut o).map_err(|e| e.to_string())?;
    }
    backend.synchronize().map_err(|e| e.to_string())?;
    outs.iter()
        .map(|o| {
            let mut h = vec![0.0; backend.buffer_len(o)];
            backend.download(o, &mut h).map(|_| h)
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())
}

/// Run `spec` on `inputs` through the default registry, which must choose
/// a library kernel (no silent fallback to the compiled evaluator), and
/// compare with the interpreter within `tol` ([`compare`]); panics naming
/// the op, shapes and attributes otherwise.
pub fn check_library(
    spec: &OpSpec,
    shapes: &[Vec<usize>],
    attrs: &Attrs,
    inputs: Vec<Vec<f32>>,
    tol: f64,
) {
    let op = &spec.name;
    let tensors: Vec<Tensor> = inputs
        .iter()
        .zip(shapes)
        .map(|(v, s)| Tensor::new(s, v.iter().map(|&x| x as f64).collect()).unwrap())
        .collect();
    let want = tdl::evaluate(spec, &tensors, attrs).unwrap_or_else(|e| panic!("{op}: {e}"));
    let case = Case {
        shapes: shapes.to_vec(),
        attrs: attrs.clone(),
        inputs,
        reference: want,
    };
    let (k, got) = run(&Registry::default(), spec, &case).unwrap();
    assert!(
        matches!(k.provider(), Provider::Library(_)),
        "`{op}` {shapes:?} {attrs:?} ran {:?}",
        k.provider()
    );
    compare(op, &got, &case.reference, tol)
        .unwrap_or_else(|e| panic!("{e} (shapes {shapes:?}, attrs {attrs:?})"));
}

/// One sampled op instance and the windows the CUDA kernel tests generate
/// its kernels for: the whole op first, then random sub-windows.
pub struct Instance<'l> {
    /// The op.
    pub spec: &'l OpSpec,
    /// Its shapes, attributes, inputs and the interpreter's outputs.
    pub case: Case,
    /// The op bound to the case's shapes.
    pub binding: Binding,
    /// The whole op, then sub-windows ([`sub_window`]).
    pub windows: Vec<Window>,
}

/// Every op of `lib` × `cases` random instances ([`sample`], dims at most 5,
/// outputs at most `max_elems` elements, seeded by the op's name) × the
/// whole op and `windows` random sub-windows; gives the instances and what
/// could not be sampled or bound.
pub fn instances(
    lib: &Library,
    cases: usize,
    windows: usize,
    max_elems: usize,
) -> (Vec<Instance<'_>>, Vec<String>) {
    let mut out = Vec::new();
    let mut failures = Vec::new();
    for spec in lib.ops() {
        let seed = spec
            .name
            .bytes()
            .fold(0x25c0u64, |h, c| h.wrapping_mul(31).wrapping_add(c as u64));
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..cases {
            let case = match sample(spec, &mut rng, 5, max_elems) {
                Ok(c) => c,
                Err(e) => {
                    failures.push(e);
                    break;
                }
            };
            let binding = match spec.bind(&case.shapes, &case.attrs) {
                Ok(b) => b,
                Err(e) => {
                    failures.push(format!("`{}`: bind: {e}", spec.name));
                    continue;
                }
            };
            let whole = match Window::whole(&binding) {
                Ok(w) => w,
                Err(e) => {
                    failures.push(format!("`{}`: window: {e}", spec.name));
                    continue;
                }
            };
            let mut ws = vec![whole.clone()];
            ws.extend((0..windows).map(|_| sub_window(&whole, &mut rng)));
            out.push(Instance {
                spec,
                case,
                binding,
                windows: ws,
            });
        }
    }
    (out, failures)
}

/// A random non-empty sub-box of every variable's range; inputs whole (a
/// buffer holding the whole tensor holds every window's reads).
pub fn sub_window(whole: &Window, rng: &mut StdRng) -> Window {
    let vars = whole
        .vars
        .iter()
        .map(|&(lo, hi)| {
            if hi - lo <= 1 {
                (lo, hi)
            } else {
                let l = rng.gen_range(lo..hi);
                (l, rng.gen_range(l + 1..=hi))
            }
        })
        .collect();
    Window {
        vars,
        inputs: whole.inputs.clone(),
    }
}

/// The reduction modes the CUDA kernel tests generate every kernel in: the
/// backend's defaults, every reduction a block, every one split over
/// several blocks.
#[cfg(feature = "cuda")]
pub fn reduce_modes() -> [runner::backend::cuda::codegen::ReduceOptions; 3] {
    use runner::backend::cuda::codegen::ReduceOptions;
    let forced = |split_min| ReduceOptions {
        block_min: 1,
        split_min,
    };
    [ReduceOptions::default(), forced(usize::MAX), forced(1)]
}
