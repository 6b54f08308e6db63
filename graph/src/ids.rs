//! Typed ids of a [`Graph`](super::Graph): [`OpId`], [`TensorId`], [`GroupId`].
//!
//! Each is a dense index (0, 1, 2, …) into the graph's operator, tensor or
//! group table. petgraph's own indices never leave the `graph` module; these
//! newtypes are the only handles callers see. In the JSON format an id is a
//! plain non-negative integer.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as a table index.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// An operator of a graph (index into [`Graph::ops`](super::Graph::ops)).
    OpId,
    "op"
);
id_type!(
    /// A tensor of a graph (index into [`Graph::tensors`](super::Graph::tensors)).
    TensorId,
    "t"
);
id_type!(
    /// A forward/backward group (Tofu §4.2.1; index into [`Graph::groups`](super::Graph::groups)).
    GroupId,
    "g"
);
