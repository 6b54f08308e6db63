//! What a planning call may be told besides the graph, k and the search.
//!
//! Takes nothing; gives [`PlanOptions`]: the device memory limit, the
//! Megatron baseline's tensor-parallel size, the cluster topology and the
//! level searches' budgets, and the recursion levels they imply
//! ([`PlanOptions::factors`]).

use super::cluster::Topology;
use super::tile::factorize;
use crate::search::SearchLimits;

/// Options of [`plan_with`](super::plan_with).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Memory of one device (bytes): every worker's peak (training state and
    /// live activations) must fit it. The search prices memory when the
    /// plan with the fewest bytes does not fit ([`super::budget`]); `None`:
    /// no limit.
    pub device_memory: Option<u64>,
    /// The Megatron baseline's tensor-parallel group size t (a divisor of
    /// k); `None`: every divisor is tried and the best kept.
    pub tensor_parallel: Option<usize>,
    /// The cluster: outer recursion levels across nodes, levels priced in
    /// estimated seconds instead of bytes ([`super::topology`]); `None`:
    /// bytes, levels from k's prime factors.
    pub topology: Option<Topology>,
    /// The budgets of each level's search (CriticalDP's refinement rounds,
    /// the ILP's time limit); a limit that stops a level is the plan's
    /// [`Planned::stop_reason`](super::Planned::stop_reason).
    pub limits: SearchLimits,
}

impl PlanOptions {
    /// The recursion levels of `workers` (outermost first): the topology's
    /// [`Topology::factors`], else k's prime factors, largest first.
    pub fn factors(&self, workers: usize) -> Vec<usize> {
        self.topology
            .map_or_else(|| factorize(workers), |t| t.factors())
    }
}
