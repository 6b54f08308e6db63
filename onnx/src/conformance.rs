//! The conformance harness: ONNX's own operator test cases, run through the
//! importer and the TDL reference interpreter.
//!
//! Takes the `node/` folder of the ONNX test data (one folder per case:
//! `model.onnx`, `test_data_set_0/input_*.pb`, `output_*.pb`); gives a
//! [`Report`]: per case pass / fail / skip with the reason, per operator
//! counts, and the coverage of ai.onnx operators by the importer, split by
//! how it handles them ([`Handling`]): lowered to TDL specs (a row of the
//! mapping table with specs), folded at import (a row without specs:
//! [`crate::fold`]), or inlined at import (`If`, `Loop`, `Scan`:
//! [`crate::control`]). A case belongs to the operator of its single node
//! (an `_expanded` case to the operator of its unexpanded twin); a case
//! whose operator the importer does not handle is not run and counts only
//! towards coverage.
//!
//! Every input's value is given to the importer as a caller-known value
//! ([`Options::input_values`]: it stays a graph input). When the import then
//! stops because a value must be known at import time (an `If` condition, a
//! `Loop` trip count, a `Range` limit), the case is imported again with the
//! inputs fixed at import ([`Options::fixed_inputs`], what a user's
//! `--input-value` does): first only the integer and boolean inputs, then all
//! of them; the inputs so fixed are recorded ([`CaseResult::fixed`]).
//!
//! Comparison uses ONNX's backend-test tolerances: |got − expected| ≤
//! [`ATOL`] + [`RTOL`] · |expected| element by element (NaN matches NaN).
//! Skips are cases the harness cannot judge (string or complex data, random
//! outputs, values ONNX computes in integer arithmetic) or that use a variant
//! of the operator the mapping does not support (the reason says which).
//!
//! The report `docs/onnx-conformance.md` is written by
//! `cargo test -p tofu-onnx --test conformance` ([`Report::markdown`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use graph::execute::{execute, Values};
use tdl::{Library, Tensor as Value};

use crate::error::OnnxError;
use crate::import::{import, Imported, Options, Output};
use crate::proto;
use crate::table;
use crate::tensor::{decode, Data};

/// Relative tolerance (ONNX backend tests).
pub const RTOL: f64 = 1e-3;
/// Absolute tolerance (ONNX backend tests).
pub const ATOL: f64 = 1e-7;

/// Cases judged with a looser absolute tolerance, and why: expected values
/// that carry the float32 rounding noise of the reference implementation
/// where the exact value is 0 (onnxruntime keeps such overrides in its
/// `onnx_backend_test_series_overrides.jsonc`). Listed in the report.
pub const ATOL_OVERRIDES: &[(&str, f64, &str)] = &[
    (
        "test_dft_inverse",
        1e-6,
        "numpy's complex64 inverse FFT leaves 1.9e-7 where the exact value is 0 (outputs up to 49.5)",
    ),
    (
        "test_dft_inverse_opset19",
        1e-6,
        "numpy's complex64 inverse FFT leaves 1.9e-7 where the exact value is 0 (outputs up to 49.5)",
    ),
];

/// The absolute tolerance of case `case` ([`ATOL`] unless overridden).
pub fn atol_of(case: &str) -> f64 {
    ATOL_OVERRIDES
        .iter()
        .find(|(c, _, _)| *c == case)
        .map_or(ATOL, |&(_, a, _)| a)
}

/// Outcome of one case.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every output matched.
    Pass,
    /// An output differed or running failed: why.
    Fail(String),
    /// Not judged: why.
    Skip(String),
    /// The case's data has no counterpart in tofu graphs (strings, complex,
    /// sequences, optionals): not counted among the cases of the operator.
    NotApplicable(String),
}

/// How the importer handles an ai.onnx operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Handling {
    /// Lowered to TDL specs (a mapping-table row with specs).
    Spec,
    /// Folded to a constant at import (a mapping-table row without specs;
    /// its inputs must be known at import).
    Folded,
    /// Replaced at import by the nodes of a subgraph (`If`'s taken branch,
    /// `Loop` and `Scan` unrolled; [`crate::control`]).
    Inlined,
}

impl Handling {
    /// How the importer handles ai.onnx operator `op`; `None` when it does
    /// not (the import stops on it).
    pub fn of(op: &str) -> Option<Handling> {
        if crate::control::INLINED_OPS.contains(&op) {
            return Some(Handling::Inlined);
        }
        table::lookup(op).map(|m| {
            if m.specs.is_empty() {
                Handling::Folded
            } else {
                Handling::Spec
            }
        })
    }

    /// Words for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Handling::Spec => "lowered to TDL specs",
            Handling::Folded => "folded at import",
            Handling::Inlined => "inlined at import (control flow)",
        }
    }
}

/// One case's result.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// Case folder name (`test_add_bcast`).
    pub case: String,
    /// The operator it tests.
    pub op: String,
    /// Whether the importer handles that operator (any [`Handling`]).
    pub mapped: bool,
    /// Outcome (only meaningful when `mapped`).
    pub outcome: Outcome,
    /// Graph inputs fixed at import (`--input-value`) to import the case;
    /// empty when the case imported with every input left an input.
    pub fixed: Vec<String>,
}

/// Results of a whole run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Every case, sorted by name.
    pub cases: Vec<CaseResult>,
}

/// Per-operator counts: (cases, passed, failed, skipped).
pub type OpCounts = BTreeMap<String, (usize, usize, usize, usize)>;

impl Report {
    /// Counts per operator the importer handles.
    pub fn per_op(&self) -> OpCounts {
        let mut m: OpCounts = BTreeMap::new();
        for c in self
            .cases
            .iter()
            .filter(|c| c.mapped && !matches!(c.outcome, Outcome::NotApplicable(_)))
        {
            let e = m.entry(c.op.clone()).or_default();
            e.0 += 1;
            match c.outcome {
                Outcome::Pass => e.1 += 1,
                Outcome::Fail(_) => e.2 += 1,
                Outcome::Skip(_) => e.3 += 1,
                Outcome::NotApplicable(_) => {}
            }
        }
        m
    }

    /// (cases of handled ops, passed, failed, skipped).
    pub fn totals(&self) -> (usize, usize, usize, usize) {
        self.per_op().values().fold((0, 0, 0, 0), |a, c| {
            (a.0 + c.0, a.1 + c.1, a.2 + c.2, a.3 + c.3)
        })
    }

    /// Operators that have node tests, and those of them the importer
    /// handles, by how.
    pub fn coverage(&self) -> (Vec<String>, BTreeMap<Handling, Vec<String>>) {
        let mut all: Vec<String> = self.cases.iter().map(|c| c.op.clone()).collect();
        all.sort();
        all.dedup();
        let mut by: BTreeMap<Handling, Vec<String>> = BTreeMap::new();
        for o in &all {
            if let Some(h) = Handling::of(o) {
                by.entry(h).or_default().push(o.clone());
            }
        }
        (all, by)
    }
}

/// Every case folder under `node_dir`, sorted.
pub fn case_dirs(node_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(node_dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    v.sort();
    Ok(v)
}

/// The operator a case tests: its single node's op type, or (expanded
/// cases) that of its unexpanded twin.
pub fn case_op(dir: &Path) -> Option<String> {
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let mut d = dir.to_path_buf();
    if let Some(i) = name.find("_expanded") {
        d = dir.with_file_name(&name[..i]);
    }
    let m = proto::read(&d.join("model.onnx"))
        .or_else(|_| proto::read(&dir.join("model.onnx")))
        .ok()?;
    let g = m.proto.graph.as_ref()?;
    g.node.first().map(|n| n.op_type.clone())
}

fn read_pb(p: &Path) -> Result<Data, String> {
    use onnx_protobuf::{Message, TensorProto};
    let bytes = std::fs::read(p).map_err(|e| e.to_string())?;
    let t = TensorProto::parse_from_bytes(&bytes).map_err(|e| format!("{}: {e}", p.display()))?;
    decode(&t)
}

/// Run one case (see the module doc).
pub fn run_case(dir: &Path, lib: &Library) -> CaseResult {
    let case = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let op = case_op(dir).unwrap_or_else(|| "?".into());
    let mapped = Handling::of(&op).is_some();
    let (outcome, fixed) = if mapped {
        run(dir, lib)
    } else {
        (Outcome::Skip("operator not handled".into()), Vec::new())
    };
    CaseResult {
        case,
        op,
        mapped,
        outcome,
        fixed,
    }
}

/// Which graph inputs an import attempt fixes at import time.
#[derive(Clone, Copy, PartialEq)]
enum Fix {
    None,
    IntegerInputs,
    AllInputs,
}

/// Import `model` with the case's `inputs`, fixing those `fix` selects;
/// gives the import result and the names fixed.
fn import_with(
    model: &proto::Model,
    path: &Path,
    lib: &Library,
    inputs: &[(String, Data)],
    fix: Fix,
) -> (Result<Imported, OnnxError>, Vec<String>) {
    let mut opts = Options::default();
    let mut fixed = Vec::new();
    for (name, d) in inputs {
        opts.input_shapes.insert(name.clone(), d.shape.clone());
        let fix_it = match fix {
            Fix::None => false,
            Fix::IntegerInputs => d.elem.is_integer(),
            Fix::AllInputs => true,
        };
        if fix_it {
            opts.fixed_inputs.insert(name.clone(), d.values.clone());
            fixed.push(name.clone());
        } else {
            opts.input_values.insert(name.clone(), d.clone());
        }
    }
    (import(model, path, lib, &opts), fixed)
}

fn run(dir: &Path, lib: &Library) -> (Outcome, Vec<String>) {
    let path = dir.join("model.onnx");
    let model = match proto::read(&path) {
        Ok(m) => m,
        Err(e) => return (Outcome::Fail(e.to_string()), Vec::new()),
    };
    let g = model.proto.graph.as_ref().expect("decoded");
    let data = dir.join("test_data_set_0");
    let inits: std::collections::HashSet<&str> =
        g.initializer.iter().map(|t| t.name.as_str()).collect();
    let names: Vec<&str> = g
        .input
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| !inits.contains(n))
        .collect();
    let mut inputs = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let p = data.join(format!("input_{i}.pb"));
        if !p.is_file() {
            // An optional input left out of the case.
            continue;
        }
        match read_pb(&p) {
            Ok(d) => inputs.push((name.to_string(), d)),
            Err(e) => {
                return (
                    Outcome::NotApplicable(format!("input data: {e}")),
                    Vec::new(),
                )
            }
        }
    }
    let mut expected = Vec::new();
    for i in 0..g.output.len() {
        match read_pb(&data.join(format!("output_{i}.pb"))) {
            Ok(d) => expected.push(d),
            Err(e) => {
                return (
                    Outcome::NotApplicable(format!("expected output: {e}")),
                    Vec::new(),
                )
            }
        }
    }
    let (mut result, mut fixed) = import_with(&model, &path, lib, &inputs, Fix::None);
    // A value needed at import (a condition, a trip count, a limit): fix the
    // inputs at import as `--input-value` does, integers first.
    for fix in [Fix::IntegerInputs, Fix::AllInputs] {
        if !matches!(result, Err(OnnxError::Node { .. })) {
            break;
        }
        let (r, f) = import_with(&model, &path, lib, &inputs, fix);
        if r.is_ok() {
            (result, fixed) = (r, f);
        }
    }
    let atol = atol_of(&dir.file_name().unwrap_or_default().to_string_lossy());
    (compare(result, &expected, atol), fixed)
}

/// Run an import result with the interpreter and compare its outputs with
/// `expected` (absolute tolerance `atol`, see [`atol_of`]).
fn compare(result: Result<Imported, OnnxError>, expected: &[Data], atol: f64) -> Outcome {
    let imported = match result {
        Ok(i) => i,
        Err(OnnxError::Node { reason, .. }) => {
            return Outcome::Skip(format!("not mapped: {reason}"))
        }
        Err(OnnxError::Unsupported { op_type, .. } | OnnxError::Domain { op_type, .. }) => {
            return Outcome::Skip(format!("uses unmapped operator {op_type}"))
        }
        Err(OnnxError::Subgraph { op_type, attr, .. }) => {
            let why = "which tofu graphs do not hold";
            return Outcome::Skip(format!(
                "uses control flow ({op_type} with subgraph `{attr}`), {why}"
            ));
        }
        Err(e @ OnnxError::Unreadable { .. }) if e.to_string().contains("element type") => {
            return Outcome::NotApplicable(e.to_string())
        }
        Err(e @ OnnxError::Unreadable { .. }) => return Outcome::Skip(e.to_string()),
        Err(e) => return Outcome::Fail(e.to_string()),
    };
    let graph = &imported.graph;
    let mut values = Values::new(graph.tensors().len());
    for (t, k) in &imported.leaf_values {
        let v = match k.data() {
            Ok(d) => d.values,
            Err(e) => return Outcome::Fail(e),
        };
        values.set(
            *t,
            Value {
                shape: k.shape.clone(),
                data: v,
            },
        );
    }
    for (i, t) in graph.tensors().iter().enumerate() {
        let id = graph::TensorId(i as u32);
        if graph.producer(id).is_none() && values.get(id).is_none() {
            return Outcome::Skip(format!(
                "input `{}` is random (no fixed value to compare)",
                t.name
            ));
        }
    }
    if let Err(e) = execute(graph, &imported.library, &mut values, |_, _| true) {
        return Outcome::Fail(format!("interpreter: {e}"));
    }
    for ((name, out), exp) in imported.outputs.iter().zip(expected) {
        let (shape, got) = match out {
            Output::Tensor(t) => match values.get(*t) {
                Some(v) => (v.shape.clone(), v.data.clone()),
                None => return Outcome::Fail(format!("output `{name}` was not computed")),
            },
            Output::Const(d) => (d.shape.clone(), d.values.clone()),
        };
        if shape != exp.shape {
            return Outcome::Fail(format!(
                "output `{name}`: shape {shape:?}, expected {:?}",
                exp.shape
            ));
        }
        for (k, (&a, &e)) in got.iter().zip(&exp.values).enumerate() {
            let ok = (a.is_nan() && e.is_nan()) || a == e || (a - e).abs() <= atol + RTOL * e.abs();
            if !ok {
                return Outcome::Fail(format!(
                    "output `{name}` element {k}: got {a}, expected {e}"
                ));
            }
        }
    }
    Outcome::Pass
}

/// Run every case under `node_dir` on `threads` threads.
pub fn run_all(node_dir: &Path, lib: &Library, threads: usize) -> std::io::Result<Report> {
    let dirs = case_dirs(node_dir)?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(d) = dirs.get(i) else { break };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(d, lib)))
                    .unwrap_or_else(|p| {
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        CaseResult {
                            case: d
                                .file_name()
                                .map(|n| n.to_string_lossy().into_owned())
                                .unwrap_or_default(),
                            op: case_op(d).unwrap_or_else(|| "?".into()),
                            mapped: true,
                            outcome: Outcome::Fail(format!("panic: {msg}")),
                            fixed: Vec::new(),
                        }
                    });
                results
                    .lock()
                    .expect("no panics while holding the lock")
                    .push(r);
            });
        }
    });
    let mut cases = results.into_inner().expect("threads joined");
    cases.sort_by(|a, b| a.case.cmp(&b.case));
    Ok(Report { cases })
}
