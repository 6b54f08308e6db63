//! The import facts of a [`Summary`] as the JSON fields `tofu graph
//! FILE.onnx --json` prints: `model`, `opsets`, `onnx_nodes`,
//! `mapped_nodes`, `folded_nodes`, `mapped_op_types` / `folded_op_types` /
//! `opaque_op_types` (op type → node count), `defaulted_dims` (`input`,
//! `axis`, `name`, `value`, `rule`), `opaque` (`node`, `op_type`, `spec`)
//! and `loss`.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::Summary;

impl Summary {
    /// Nodes lowered to spec operators, all op types together.
    pub fn mapped_nodes(&self) -> usize {
        self.mapped.values().sum()
    }

    /// Nodes computed at import, all op types together.
    pub fn folded_nodes(&self) -> usize {
        self.folded.values().sum()
    }

    /// The JSON fields of the summary (see the module doc).
    pub fn json_fields(&self) -> Map<String, Value> {
        let mut opaque_types = BTreeMap::<&str, usize>::new();
        for o in &self.opaque {
            *opaque_types.entry(o.op_type.as_str()).or_default() += 1;
        }
        let dims: Vec<Value> = self
            .defaulted_dims
            .iter()
            .map(|d| json!({"input": d.input, "axis": d.axis, "name": d.name, "value": d.value, "rule": d.rule}))
            .collect();
        let opaque: Vec<Value> = self
            .opaque
            .iter()
            .map(|o| json!({"node": o.node, "op_type": o.op_type, "spec": o.spec}))
            .collect();
        let Value::Object(m) = json!({
            "model": self.model,
            "opsets": self.opsets,
            "onnx_nodes": self.nodes,
            "mapped_nodes": self.mapped_nodes(),
            "folded_nodes": self.folded_nodes(),
            "mapped_op_types": self.mapped,
            "folded_op_types": self.folded,
            "opaque_op_types": opaque_types,
            "defaulted_dims": dims,
            "opaque": opaque,
            "loss": self.loss,
        }) else {
            unreachable!("json! of an object literal is an object")
        };
        m
    }
}
