//! The compiled evaluator on constructs the shipped library may not use yet
//! (`tests/specs/evaluator.tdl`): data-dependent reads, `let` temporaries,
//! several outputs reading each other, padding, floor division and modulo
//! in indices, negative strides, all reducers, scalar outputs, every kind of
//! built-in, select and logic, opaque functions. Each is checked against the
//! interpreter on random shapes; run-time errors are checked to be typed.

mod common;

use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::SeedableRng;
use runner::{KernelError, Provider, Registry};
use tdl::Library;

fn lib() -> Library {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/specs/evaluator.tdl");
    match Library::load(&[p]) {
        Ok(l) => l,
        Err(tdl::LibraryError::Invalid(d)) => panic!("{}", d.render()),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn compiled_evaluator_matches_the_interpreter() {
    let lib = lib();
    let reg = Registry::empty();
    let mut failures = Vec::new();
    for spec in lib.ops() {
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..6 {
            let case = match common::sample(spec, &mut rng, 5, 4096) {
                Ok(c) => c,
                Err(e) => {
                    failures.push(e);
                    break;
                }
            };
            match common::run(&reg, spec, &case) {
                Ok((k, got)) => {
                    assert_eq!(k.provider(), Provider::Compiled);
                    if let Err(e) = common::compare(&spec.name, &got, &case.reference, 1e-4) {
                        failures.push(format!(
                            "{e} (shapes {:?}, attrs {:?})",
                            case.shapes, case.attrs
                        ));
                    }
                }
                Err(e) => failures.push(format!("`{}`: {e}", spec.name)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Large enough to run in parallel chunks (split inside rows), and rows
/// longer than one evaluation block: equal to row-by-row runs.
#[test]
fn parallel_chunks_and_long_rows_give_the_same_result() {
    let lib = lib();
    let spec = lib.get("t_layernorm").unwrap();
    for (rows, n) in [(3 * 77, 301), (7, 1300)] {
        let shapes = vec![vec![rows, n], vec![n], vec![n]];
        let k = Registry::empty()
            .prepare(spec, &shapes, &Default::default())
            .unwrap();
        let inputs: Vec<Vec<f32>> = shapes
            .iter()
            .map(|s| {
                (0..s.iter().product())
                    .map(|i: usize| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
                    .collect()
            })
            .collect();
        let ins: Vec<&[f32]> = inputs.iter().map(|v| &v[..]).collect();
        let mut a = vec![0.0f32; rows * n];
        k.run(&ins, &mut [&mut a]).unwrap();
        let row = Registry::empty()
            .prepare(spec, &[vec![n], vec![n], vec![n]], &Default::default())
            .unwrap();
        for r in 0..rows {
            let mut y = vec![0.0f32; n];
            row.run(
                &[&inputs[0][r * n..(r + 1) * n], ins[1], ins[2]],
                &mut [&mut y],
            )
            .unwrap();
            assert_eq!(&a[r * n..(r + 1) * n], &y[..], "row {r} of [{rows}, {n}]");
        }
    }
}

#[test]
fn runtime_errors_are_typed() {
    let lib = lib();
    let reg = Registry::empty();
    // An embedding id out of range.
    let spec = lib.get("t_embedding").unwrap();
    let k = reg
        .prepare(spec, &[vec![3, 2], vec![2]], &Default::default())
        .unwrap();
    let mut y = vec![0.0; 4];
    let e = k.run(&[&[0.0; 6], &[1.0, 7.0]], &mut [&mut y]).unwrap_err();
    assert_eq!(
        e,
        KernelError::OutOfBounds {
            op: "t_embedding".into(),
            tensor: "table".into(),
            index: vec![7, 0],
            shape: vec![3, 2]
        }
    );
    // Cholesky of a matrix that is not positive definite.
    let spec = lib.get("t_cholesky").unwrap();
    let k = reg
        .prepare(spec, &[vec![1, 2, 2]], &Default::default())
        .unwrap();
    let mut l = vec![0.0; 4];
    let e = k.run(&[&[1.0, 2.0, 2.0, 1.0]], &mut [&mut l]).unwrap_err();
    assert!(
        matches!(e, KernelError::Opaque { ref name, .. } if name == "cholesky"),
        "{e}"
    );
    // Wrong buffers.
    let e = k.run(&[&[1.0; 3]], &mut [&mut l]).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::BufferLength {
                expected: 4,
                got: 3,
                ..
            }
        ),
        "{e}"
    );
    let e = k.run(&[], &mut [&mut l]).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::BufferCount {
                expected: 1,
                got: 0,
                ..
            }
        ),
        "{e}"
    );
    // Shapes that do not fit the spec.
    let e = reg
        .prepare(spec, &[vec![1, 2, 3]], &Default::default())
        .unwrap_err();
    assert!(matches!(e, KernelError::Shape(_)), "{e}");
}
