//! Training graphs: the dataflow IR, shape inference, backward and optimizer
//! generation, memory accounting, the graph file format, the box type
//! [`Region`] and the model [`zoo`].
//!
//! Takes the operator library ([`tdl::Library`]); gives [`Graph`]s that the
//! ONNX importer, the planner, codegen and the runner read. Depends on `tdl`
//! alone (ARCHITECTURE.md).
//!
//! Data flow: [`GraphBuilder`] (forward ops by spec name, shapes inferred
//! with [`tdl::OpSpec::bind`]) → [`training_graph`] (backward ops from the
//! specs' gradient declarations, gradient sums, optimizer update) →
//! [`MemoryReport`] / [`format`] (JSON) / [`execute`] (reference run with the
//! TDL interpreter).
//!
//! Files: `ids.rs` typed ids, `ir.rs` the graph, `error.rs` errors,
//! `build.rs` forward construction, `training.rs` backward + update,
//! `optimizer.rs` optimizer kinds,
//! `memory.rs` accounting, `format.rs` JSON, `attrs.rs` attribute encoding,
//! `execute.rs` reference execution, `outputs.rs` the model's named outputs,
//! `region.rs` boxes of elements, `value_ranges.rs` value intervals and the
//! synthetic ids of integer inputs, `zoo/` the benchmark models.

#![warn(missing_docs)]

mod attrs;
mod build;
mod error;
pub mod execute;
pub mod format;
mod ids;
mod ir;
pub mod memory;
mod optimizer;
mod outputs;
mod parts;
pub mod region;
pub mod summary;
mod training;
pub mod value_ranges;
pub mod zoo;

pub use build::{float, int, Attr, GraphBuilder};
pub use error::GraphError;
pub use ids::{GroupId, OpId, TensorId};
pub use ir::{DType, Fill, Graph, Group, Op, OpRole, Tensor, TensorRole};
pub use memory::{MemoryClass, MemoryReport};
pub use optimizer::{checked_lr, checked_weight_decay, Optimizer};
pub use outputs::GraphOutput;
pub use region::{part_range, Region};
pub use training::{training_graph, training_graph_with};
