//! The model's outputs by name: for a graph imported from ONNX, the graph
//! outputs (`GraphProto.output`) by their ONNX names and the tensors that
//! hold them, so a run can save them under those names (`tofu run
//! --save-outputs`). Zoo graphs have none. Kept by [`super::training_graph`]
//! (forward tensors keep their ids) and by the graph file (`"outputs"`,
//! absent when empty).

use serde::{Deserialize, Serialize};

use super::error::GraphError;
use super::ids::TensorId;
use super::ir::Graph;

/// One named output of the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphOutput {
    /// The model's name for it (the ONNX value name).
    pub name: String,
    /// The tensor holding it.
    pub tensor: TensorId,
}

impl Graph {
    /// The model's named outputs, in the model's order (empty for graphs
    /// that are not imported).
    pub fn outputs(&self) -> &[GraphOutput] {
        &self.outputs
    }

    /// Record the model's named outputs.
    ///
    /// Errors: [`GraphError::Invalid`] for a tensor id out of range or a
    /// name given twice.
    pub fn set_outputs(&mut self, outputs: Vec<GraphOutput>) -> Result<(), GraphError> {
        let n = self.tensors().len();
        for (i, o) in outputs.iter().enumerate() {
            let at = format!("outputs[{i}]");
            if o.tensor.index() >= n {
                return Err(GraphError::Invalid {
                    at,
                    message: format!(
                        "tensor id {} is out of range (the graph has {n} tensors)",
                        o.tensor.0
                    ),
                });
            }
            if outputs[..i].iter().any(|p| p.name == o.name) {
                return Err(GraphError::Invalid {
                    at,
                    message: format!("output name `{}` is given twice", o.name),
                });
            }
        }
        self.outputs = outputs;
        Ok(())
    }
}
