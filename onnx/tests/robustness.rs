//! Truncated, corrupted and non-ONNX inputs give clear errors, never panics:
//! fixed cases plus a property test flipping, deleting and truncating bytes
//! of a real model (light_squeezenet, from the fetched ONNX test data).

mod common;

use std::path::Path;

use proptest::prelude::*;

fn import_bytes(bytes: &[u8]) -> Result<(), onnx::OnnxError> {
    let lib = library();
    let model = onnx::proto::decode(bytes, Path::new("corrupt.onnx"))?;
    onnx::import(
        &model,
        Path::new("corrupt.onnx"),
        lib,
        &onnx::Options::default(),
    )
    .map(|_| ())
}

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

#[test]
fn non_onnx_inputs_are_clear_errors() {
    for (bytes, expect) in [
        (&b""[..], "empty"),
        (
            &b"hello, this is not a model\n"[..],
            "not a valid ONNX model",
        ),
        (&[0x08, 0x07][..], "no graph"),
        (&[0xff; 16][..], "not a valid ONNX model"),
    ] {
        let e = import_bytes(bytes).expect_err("must fail").to_string();
        assert!(e.contains(expect), "{e}");
        assert!(e.contains("corrupt.onnx"), "names the file: {e}");
    }
    let e = onnx::load_graph(
        Path::new("/nonexistent/model.onnx"),
        &onnx::Options::default(),
    )
    .err()
    .expect("missing file")
    .to_string();
    assert!(e.contains("/nonexistent/model.onnx"), "{e}");
}

#[test]
fn truncated_model_is_a_clear_error() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    let bytes = std::fs::read(dir.join("light/light_squeezenet.onnx")).unwrap();
    for cut in [1, 10, 100, bytes.len() / 2, bytes.len() - 1] {
        let e = import_bytes(&bytes[..cut])
            .expect_err("truncated")
            .to_string();
        assert!(e.contains("corrupt.onnx"), "{e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_model_never_panics(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let Some(dir) = common::data_dir() else { return Ok(()) };
        static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let original = BYTES.get_or_init(|| std::fs::read(dir.join("light/light_squeezenet.onnx")).unwrap());
        let mut bytes = original.clone();
        for (at, value, kind) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match kind {
                0 => bytes[i] = value,
                1 => bytes[i] ^= 1 << (value % 8),
                _ => {
                    bytes.remove(i);
                }
            }
        }
        if let Some(c) = cut {
            let n = c.index(bytes.len().max(1));
            bytes.truncate(n);
        }
        // Ok or a typed error; a panic fails the test.
        let _ = import_bytes(&bytes);
    }
}

/// The bytes of `model` with `edits` applied (overwrite, flip a bit, delete).
fn corrupt(model: &[u8], edits: &[(prop::sample::Index, u8, u8)]) -> Vec<u8> {
    let mut bytes = model.to_vec();
    for (at, value, kind) in edits {
        if bytes.is_empty() {
            break;
        }
        let i = at.index(bytes.len());
        match kind {
            0 => bytes[i] = *value,
            1 => bytes[i] ^= 1 << (value % 8),
            _ => {
                bytes.remove(i);
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The new paths of issue 15 — folding through the interpreter (the
    /// decoder's shape chains), `If` on a shape, external data with a
    /// missing, short or garbage data file — give errors, never panics.
    #[test]
    fn folding_control_flow_and_external_data_never_panic(
        which in 0u8..3,
        width in 0i64..6,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..6),
        data in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
    ) {
        let dir = std::env::temp_dir().join(format!("tofu-robust-{}-{which}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, bytes) = match which {
            0 => {
                let m = common::models::if_on_shape(width).proto;
                (dir.join("if.onnx"), onnx::synth::to_bytes(&m))
            }
            _ => {
                let (p, _) = common::models::with_external_shape(&dir);
                let b = std::fs::read(&p).unwrap();
                (p, b)
            }
        };
        let data_file = dir.join("shape.bin");
        let _ = std::fs::remove_file(&data_file);
        if let Some(d) = &data {
            std::fs::write(&data_file, d).unwrap();
        }
        let bytes = if which == 2 { bytes } else { corrupt(&bytes, &edits) };
        let opts = onnx::Options {
            input_shapes: [("input_ids".to_string(), vec![1, 1 + width as usize])].into(),
            ..Default::default()
        };
        // Ok or a typed error; a panic fails the test.
        if let Ok(model) = onnx::proto::decode(&bytes, &path) {
            let _ = onnx::import(&model, &path, library(), &opts);
            let _ = onnx::import(&model, &path, library(), &onnx::Options::default());
        }
    }
}
