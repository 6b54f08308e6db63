//! Node attributes by name, typed, with defaults.
//!
//! Takes an ONNX `NodeProto`; gives its attributes as ints, floats, int
//! lists, strings and tensors. Reads the typed fields directly (never the
//! `onnx-protobuf` helper that panics on a malformed tensor attribute), so a
//! corrupted model gives an error, not a panic.

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, NodeProto};

use crate::tensor::{decode, Data};

/// The attributes of one node.
pub struct Attrs<'a> {
    node: &'a NodeProto,
}

impl<'a> Attrs<'a> {
    /// Wrap a node.
    pub fn new(node: &'a NodeProto) -> Self {
        Attrs { node }
    }

    /// The raw attribute, if present.
    pub fn get(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == name)
    }

    /// Whether the attribute is present.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// An int attribute, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.get(name).map_or(default, |a| a.i)
    }

    /// A float attribute, or `default`.
    pub fn float(&self, name: &str, default: f64) -> f64 {
        self.get(name).map_or(default, |a| a.f as f64)
    }

    /// An int-list attribute (`None` if absent).
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.get(name).map(|a| a.ints.clone())
    }

    /// A float-list attribute (`None` if absent).
    pub fn floats(&self, name: &str) -> Option<Vec<f64>> {
        self.get(name)
            .map(|a| a.floats.iter().map(|&f| f as f64).collect())
    }

    /// A string attribute (lossy UTF-8), or `default`.
    pub fn string(&self, name: &str, default: &str) -> String {
        self.get(name).map_or(default.to_string(), |a| {
            String::from_utf8_lossy(&a.s).into_owned()
        })
    }

    /// A tensor attribute, decoded. Errors: absent or undecodable, as a message.
    pub fn tensor(&self, name: &str) -> Result<Option<Data>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(a) => match a.t.as_ref() {
                Some(t) => decode(t).map(Some),
                None => Err(format!("attribute `{name}` holds no tensor")),
            },
        }
    }

    /// The first graph-valued attribute: (name, nodes in it).
    pub fn subgraph(&self) -> Option<(String, usize)> {
        self.node.attribute.iter().find_map(|a| {
            let is_graph = matches!(
                a.type_.enum_value(),
                Ok(AttributeType::GRAPH) | Ok(AttributeType::GRAPHS)
            ) || a.g.is_some()
                || !a.graphs.is_empty();
            is_graph.then(|| {
                let n = a.g.as_ref().map_or(0, |g| g.node.len())
                    + a.graphs.iter().map(|g| g.node.len()).sum::<usize>();
                (a.name.clone(), n)
            })
        })
    }
}
