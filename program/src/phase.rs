//! When a transfer happens relative to its operator's compute: the tag of
//! every message and collective in a program, and of the planner's
//! transfers (Tofu §4.3).

use serde::{Deserialize, Serialize};

/// When a transfer happens relative to its operator's compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Before the compute: fetching a piece of input `slot`.
    Input {
        /// Input position.
        slot: usize,
    },
    /// After the compute: assembling (and reducing) output `slot` into its tiles.
    Output {
        /// Output position.
        slot: usize,
    },
    /// After `Output`: completing the copies of a replicated output `slot`.
    Gather {
        /// Output position.
        slot: usize,
    },
}
