//! An ONNX model with its initializers replaced by trained values (`tofu
//! train … --save-onnx OUT.onnx`; issue 38, item 5): a user gets back a
//! model onnxruntime (or tofu) runs, the graph unchanged.
//!
//! Takes the model the plan was made from and the trained weights by graph
//! name (the names `--save-weights` writes: an initializer keeps its name
//! through the import); gives the model's bytes with every float
//! initializer that has a trained value of the same element count rewritten
//! (little-endian `raw_data`, in the model's own shape), and a report of
//! what was replaced and what was not. Trained weights that are no
//! initializer of the model (values from `Constant` nodes or `If` branches,
//! weights the import folded into new tensors) are listed, not written.
//! The caller writes the bytes (atomically).

use std::collections::HashMap;
use std::path::Path;

use protobuf::Message;

use crate::values::ValuesError;

/// What [`with_trained_initializers`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainedModel {
    /// The model, serialised.
    pub bytes: Vec<u8>,
    /// Initializers given their trained values.
    pub replaced: Vec<String>,
    /// Float initializers without a trained value (kept as they were).
    pub kept: Vec<String>,
    /// Trained weights that are no float initializer of the model.
    pub not_initializers: Vec<String>,
}

/// What was replaced: `N initializer(s) trained, K kept as they were`, and
/// the trained weights that are no initializer of the model, if any.
impl std::fmt::Display for TrainedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, k) = (self.replaced.len(), self.kept.len());
        write!(f, "{n} initializer(s) trained, {k} kept as they were")?;
        if !self.not_initializers.is_empty() {
            let names = self.not_initializers.join(", ");
            write!(
                f,
                "; trained weights that are no initializer of the model (not written): {names}"
            )?;
        }
        Ok(())
    }
}

/// `model` (an `.onnx` file) with every float initializer named in
/// `trained` (name → row-major values) set to those values.
///
/// Errors: [`ValuesError::Read`] for a file that cannot be read, is not
/// ONNX or does not serialise; [`ValuesError::Value`] naming an initializer
/// whose element count differs from its trained value's (a model other
/// than the one planned).
pub fn with_trained_initializers(
    model: &Path,
    trained: &HashMap<String, Vec<f32>>,
) -> Result<TrainedModel, ValuesError> {
    let read = |message: String| ValuesError::Read {
        file: model.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(model).map_err(|e| read(e.to_string()))?;
    let mut proto = crate::proto::decode(&bytes, model)
        .map_err(ValuesError::Import)?
        .proto;
    let mut out = TrainedModel::default();
    let graph = proto.graph.mut_or_insert_default();
    for t in graph.initializer.iter_mut().filter(|t| t.data_type == 1) {
        let Some(v) = trained.get(&t.name) else {
            out.kept.push(t.name.clone());
            continue;
        };
        let elems: i64 = t.dims.iter().product();
        if elems != v.len() as i64 {
            return Err(ValuesError::Value {
                file: model.to_path_buf(),
                name: t.name.clone(),
                message: format!(
                    "the initializer has {elems} elements (dims {:?}), the trained weight {}: is this the model the plan was made from?",
                    t.dims,
                    v.len()
                ),
            });
        }
        t.float_data.clear();
        t.external_data.clear();
        t.data_location = Default::default();
        t.raw_data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        out.replaced.push(t.name.clone());
    }
    let floats: std::collections::HashSet<&str> = graph
        .initializer
        .iter()
        .filter(|t| t.data_type == 1)
        .map(|t| t.name.as_str())
        .collect();
    out.not_initializers = trained
        .keys()
        .filter(|n| !floats.contains(n.as_str()))
        .cloned()
        .collect();
    out.not_initializers.sort();
    out.bytes = proto
        .write_to_bytes()
        .map_err(|e| read(format!("serialising the model: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use onnx_protobuf::{GraphProto, ModelProto, TensorProto};

    use super::*;

    fn initializer(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
        let mut t = TensorProto::new();
        t.name = name.into();
        t.data_type = 1;
        t.dims = dims.to_vec();
        t.float_data = values.to_vec();
        t
    }

    /// A model file with initializers `w` [2, 2] and `b` [2] (no nodes:
    /// only the initializers matter here).
    fn model_file(dir: &Path) -> std::path::PathBuf {
        let mut g = GraphProto::new();
        g.name = "g".into();
        g.initializer
            .push(initializer("w", &[2, 2], &[1.0, 2.0, 3.0, 4.0]));
        g.initializer.push(initializer("b", &[2], &[0.5, 0.5]));
        let mut m = ModelProto::new();
        m.ir_version = 8;
        m.graph = Some(g).into();
        let path = dir.join("m.onnx");
        std::fs::write(&path, m.write_to_bytes().unwrap()).unwrap();
        path
    }

    fn decoded(bytes: &[u8]) -> HashMap<String, Vec<f32>> {
        let m = ModelProto::parse_from_bytes(bytes).unwrap();
        m.graph
            .initializer
            .iter()
            .map(|t| {
                let d = crate::tensor::decode(t).unwrap();
                (t.name.clone(), d.values.iter().map(|&x| x as f32).collect())
            })
            .collect()
    }

    #[test]
    fn trained_values_replace_the_initializers_of_their_names() {
        let dir = std::env::temp_dir().join(format!("tofu-onnx-trained-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = model_file(&dir);
        let trained: HashMap<String, Vec<f32>> = [
            ("w".to_string(), vec![-1.0, -2.0, -3.0, -4.5]),
            ("fold/w.t".to_string(), vec![9.0]),
        ]
        .into();
        let out = with_trained_initializers(&path, &trained).unwrap();
        assert_eq!(out.replaced, ["w"]);
        assert_eq!(out.kept, ["b"]);
        assert_eq!(out.not_initializers, ["fold/w.t"]);
        assert_eq!(
            out.to_string(),
            "1 initializer(s) trained, 1 kept as they were; trained weights that are no initializer of the model (not written): fold/w.t"
        );
        let got = decoded(&out.bytes);
        assert_eq!(got["w"], [-1.0, -2.0, -3.0, -4.5]);
        assert_eq!(got["b"], [0.5, 0.5], "untouched");

        // A trained weight of another size: not the model planned.
        let wrong: HashMap<String, Vec<f32>> = [("b".to_string(), vec![1.0; 3])].into();
        let e = with_trained_initializers(&path, &wrong).unwrap_err();
        assert!(
            e.to_string().contains("`b`") && e.to_string().contains("2 elements"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
