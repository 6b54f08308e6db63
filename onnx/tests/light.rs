//! The nine `light_*` models of the ONNX test data import, with the operator
//! and parameter counts computed independently from the file.
//!
//! The independent count walks the protobuf directly (not the importer): a
//! node is a weight node if it is `Constant`/`ConstantOfShape`, a folded
//! node if all its inputs are initializers or outputs of weight/folded nodes
//! and it is a view (`Unsqueeze`, `Reshape`, ...), and a compute node
//! otherwise. Parameters are the elements of float initializers and
//! `ConstantOfShape` outputs that some node reads (light_resnet50:
//! 25,608,360 from ConstantOfShape + 1,792 from initializers).

mod common;

use std::collections::{BTreeMap, HashSet};

use onnx_protobuf::{Message, ModelProto};
use planner::graph::{MemoryReport, OpRole};

/// (compute nodes, parameters from ConstantOfShape, parameters from initializers).
fn independent_counts(bytes: &[u8]) -> (usize, u64, u64) {
    let m = ModelProto::parse_from_bytes(bytes).unwrap();
    let g = m.graph.as_ref().unwrap();
    let used: HashSet<&str> = g
        .node
        .iter()
        .flat_map(|n| n.input.iter().map(String::as_str))
        .collect();
    let mut constant: HashSet<String> = g.initializer.iter().map(|t| t.name.clone()).collect();
    let shape_of = |name: &str| -> Vec<i64> {
        let t = g.initializer.iter().find(|t| t.name == name).unwrap();
        if !t.int64_data.is_empty() {
            t.int64_data.clone()
        } else {
            t.raw_data
                .chunks(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        }
    };
    let (mut compute, mut cos) = (0usize, 0u64);
    for n in &g.node {
        let all_const = n.input.iter().all(|i| constant.contains(i));
        match n.op_type.as_str() {
            "ConstantOfShape" => {
                if used.contains(n.output[0].as_str()) {
                    cos += shape_of(&n.input[0]).iter().product::<i64>() as u64;
                }
                constant.extend(n.output.iter().cloned());
            }
            "Constant" => constant.extend(n.output.iter().cloned()),
            "Unsqueeze" | "Squeeze" | "Reshape" | "Flatten" | "Identity" | "Shape" if all_const => {
                constant.extend(n.output.iter().cloned())
            }
            _ => compute += 1,
        }
    }
    let init: u64 = g
        .initializer
        .iter()
        .filter(|t| t.data_type == 1 && used.contains(t.name.as_str()))
        .map(|t| t.dims.iter().product::<i64>() as u64)
        .sum();
    (compute, cos, init)
}

#[test]
fn light_models_import_with_independent_counts() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    let mut table = Vec::new();
    for name in common::LIGHT {
        let path = dir.join("light").join(format!("{name}.onnx"));
        let bytes = std::fs::read(&path).unwrap();
        let (compute, cos, init) = independent_counts(&bytes);
        let imported = onnx::load_graph(&path, &onnx::Options::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let g = &imported.graph;
        // Every compute node shows up as (at least) one operator named after it.
        let nodes: BTreeMap<String, usize> = g.ops().iter().fold(BTreeMap::new(), |mut m, o| {
            *m.entry(o.name.split('/').next().unwrap().to_string())
                .or_default() += 1;
            m
        });
        assert_eq!(
            nodes.len(),
            compute,
            "{name}: ONNX compute nodes vs nodes with operators"
        );
        let mapped: usize = imported.summary.mapped.values().sum();
        assert_eq!(mapped, compute, "{name}: mapped nodes");
        assert!(g.ops().iter().all(|o| o.role == OpRole::Forward));
        let mem = MemoryReport::of(g);
        assert_eq!(mem.parameters, cos + init, "{name}: parameters");
        if *name == "light_resnet50" {
            assert_eq!(cos, 25_608_360);
        }
        table.push(format!(
            "{name:<22} nodes {:>5} compute {:>4} ops {:>4} params {:>11} (ConstantOfShape {cos}, initializers {init})",
            imported.summary.nodes,
            compute,
            g.ops().len(),
            mem.parameters
        ));
    }
    println!("{}", table.join("\n"));
}

#[test]
fn resnet50_training_graph_builds() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    let path = dir.join("light/light_resnet50.onnx");
    let opts = onnx::Options {
        training: true,
        ..Default::default()
    };
    let imported = onnx::load_graph(&path, &opts).unwrap_or_else(|e| panic!("{e}"));
    let g = &imported.graph;
    assert!(g.loss().is_some());
    assert!(g.ops().iter().any(|o| o.role == OpRole::Backward));
    assert!(g.ops().iter().any(|o| o.role == OpRole::Update));
}

#[test]
fn alexnet_training_graph_has_dropout_with_mask_inputs() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    // Its two Dropout nodes (opset 9) request the Mask output.
    let path = dir.join("light/light_bvlc_alexnet.onnx");
    let opts = onnx::Options {
        training: true,
        ..Default::default()
    };
    let imported = onnx::load_graph(&path, &opts).unwrap_or_else(|e| panic!("{e}"));
    let g = &imported.graph;
    assert!(g.loss().is_some());
    let dropouts: Vec<_> = g
        .ops()
        .iter()
        .filter(|o| o.spec == "dropout" && o.role == OpRole::Forward)
        .collect();
    assert_eq!(dropouts.len(), 2, "one dropout op per ONNX Dropout node");
    for d in &dropouts {
        // The keep-mask is a per-step graph input named after the node, of x's shape.
        let mask = d.inputs[1];
        assert!(g.producer(mask).is_none(), "mask of {} is an input", d.name);
        assert_eq!(g.tensor(mask).name, format!("{}.mask", d.name));
        assert_eq!(g.tensor(mask).shape, g.tensor(d.inputs[0]).shape);
        // Its gradient is the same dropout applied to dy, with the same mask.
        assert!(
            g.ops()
                .iter()
                .any(|o| o.role == OpRole::Backward && o.spec == "dropout" && o.inputs[1] == mask),
            "backward dropout of {}",
            d.name
        );
    }
    // Inference import keeps Dropout as identity.
    let inf = onnx::load_graph(&path, &onnx::Options::default()).unwrap();
    assert!(inf.graph.ops().iter().all(|o| o.spec != "dropout"));
}
