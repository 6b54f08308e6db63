//! What makes a node layout unusable before any process starts: no ranks
//! or no nodes, a node index past the nodes, port 0 (each rank would pick
//! its own). The messages name `tofu launch`'s flags.
//!
//! Takes a [`Layout`]; gives `Ok` or the first [`LayoutError`].

use crate::launcher::Layout;

/// Why a layout cannot be launched.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// No processes per node, or no nodes.
    #[error("--nproc-per-node and --nnodes must be at least 1")]
    Empty,
    /// This node's index is not below the node count.
    #[error("--node-rank {node_rank} is not below --nnodes {nnodes}")]
    NodeRank {
        /// This node's index.
        node_rank: usize,
        /// Nodes in the run.
        nnodes: usize,
    },
    /// Port 0, which every rank would resolve to a port of its own.
    #[error("--master-port 0 cannot be shared with the other ranks; pick a port, e.g. 29500")]
    Port,
}

impl Layout {
    /// Checks the layout (see the module doc).
    ///
    /// Errors: [`LayoutError`], the first problem found.
    pub fn check(&self) -> Result<(), LayoutError> {
        if self.nproc_per_node == 0 || self.nnodes == 0 {
            return Err(LayoutError::Empty);
        }
        if self.node_rank >= self.nnodes {
            return Err(LayoutError::NodeRank {
                node_rank: self.node_rank,
                nnodes: self.nnodes,
            });
        }
        if self.master_port == 0 {
            return Err(LayoutError::Port);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(nproc_per_node: usize, nnodes: usize, node_rank: usize, port: u16) -> Layout {
        Layout {
            nproc_per_node,
            nnodes,
            node_rank,
            master_addr: "127.0.0.1".into(),
            master_port: port,
        }
    }

    #[test]
    fn each_problem_is_named_and_a_good_layout_passes() {
        assert_eq!(layout(0, 1, 0, 29500).check(), Err(LayoutError::Empty));
        assert_eq!(layout(2, 0, 0, 29500).check(), Err(LayoutError::Empty));
        let e = layout(2, 2, 2, 29500).check().unwrap_err();
        assert_eq!(e.to_string(), "--node-rank 2 is not below --nnodes 2");
        assert_eq!(layout(2, 1, 0, 0).check(), Err(LayoutError::Port));
        assert_eq!(layout(2, 2, 1, 29500).check(), Ok(()));
    }
}
