//! Training graphs: the dataflow IR, shape inference, backward and optimizer
//! generation, memory accounting and the graph file format.
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
//! `execute.rs` reference execution, `outputs.rs` the model's named outputs.

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
mod training;

pub use build::{float, int, Attr, GraphBuilder};
pub use error::GraphError;
pub use ids::{GroupId, OpId, TensorId};
pub use ir::{DType, Fill, Graph, Group, Op, OpRole, Tensor, TensorRole};
pub use memory::{MemoryClass, MemoryReport};
pub use optimizer::Optimizer;
pub use outputs::GraphOutput;
pub use training::training_graph;
