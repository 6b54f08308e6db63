//! What a planning call may be told besides the graph, k and the search.
//!
//! Takes nothing; gives [`PlanOptions`]: the device memory limit, the
//! Megatron baseline's tensor-parallel size, the cluster topology and the
//! level searches' budgets, and the recursion levels they imply
//! ([`PlanOptions::factors`]); and [`parse_bytes`], a device memory as
//! written (`80G`).

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
    /// Let the searches hold activations and gradients as per-worker
    /// partial sums and reduce them once, where a non-linear consumer needs
    /// them (issue 41; `tofu plan --partial-sums`). Off by default: plans
    /// with partial layouts are not executable yet (codegen refuses them).
    /// Costed in bytes only (ignored with a topology).
    pub partial_sums: bool,
}

impl PlanOptions {
    /// The recursion levels of `workers` (outermost first): the topology's
    /// [`Topology::factors`], else k's prime factors, largest first.
    pub fn factors(&self, workers: usize) -> Vec<usize> {
        self.topology
            .map_or_else(|| factorize(workers), |t| t.factors())
    }
}

/// Parse a size in bytes: `80G`, `512M`, `1073741824` (suffixes K, M, G, T
/// are powers of 1024; fractions allowed, rounded down).
///
/// Errors: a message showing how to write it (for `--device-memory`).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        Some('T' | 't') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size in bytes; write e.g. 80G, 512M or 1073741824"))?;
    if !(v >= 0.0 && v.is_finite()) {
        return Err(format!("`{s}` is not a size in bytes"));
    }
    Ok((v * mul as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_in_powers_of_1024() {
        assert_eq!(parse_bytes("80G"), Ok(80 * 1024 * 1024 * 1024));
        assert_eq!(parse_bytes("1.5k"), Ok(1536));
        assert_eq!(parse_bytes(" 1073741824 "), Ok(1 << 30));
        assert!(parse_bytes("-1G").is_err());
        assert!(parse_bytes("eighty").is_err());
        assert!(parse_bytes("infG").is_err());
    }
}
