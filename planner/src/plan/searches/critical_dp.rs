//! `critical-dp`: Tofu's search (§4.2.2, §4.4) and the candidates it weighs.

use super::megatron::Megatron;
use super::{Candidate, LayoutRule, PlanOptions, Search};

/// CriticalDP on the coarsened graph, recursively. Candidates: the recursion
/// over the prime factors of k (Tofu §4.4; with a topology, node levels
/// outermost, [`PlanOptions::factors`]); for composite k, one k-way level
/// (the greedy level-by-level recursion can lose to a direct split, e.g. on
/// unrolled RNNs); whole-model data parallelism, kept only when it fits
/// (it moves fewer bytes than any partitioning when weights are small next to
/// activations, 2·(k−1)/k of the weights against ≥ 3·(k−1)/k for splitting
/// them, but needs the whole model on every worker); and hybrids with data
/// parallelism on the outer s levels and the free search inside (every s
/// between; on ties the earlier candidate is kept); and the Megatron-style
/// candidates of [`Megatron`] with t > 1 (so CriticalDP never loses to that
/// baseline).
pub struct CriticalDp;

impl Search for CriticalDp {
    fn name(&self) -> &'static str {
        "critical-dp"
    }

    fn candidates(&self, workers: usize, opts: &PlanOptions) -> Vec<Candidate> {
        let factors = opts.factors(workers);
        let mut out = Candidate::uniform(factors.clone(), LayoutRule::Free, None);
        if factors.len() > 1 {
            out.extend(Candidate::uniform(vec![workers], LayoutRule::Free, None));
        }
        if workers > 1 {
            let mut dp = Candidate::uniform(
                factors.clone(),
                LayoutRule::DataParallel,
                Some("data parallelism".to_string()),
            );
            dp[0].only_if_fits = true;
            out.extend(dp);
        }
        // Hybrids: data parallelism on the outer s levels, the free search
        // inside (Megatron-LM's shape: replicas across the slow outer
        // levels, partitioning within). The level-by-level recursion alone
        // decides the outer levels without seeing the inner ones.
        for s in 1..factors.len() {
            let mut rules = vec![LayoutRule::DataParallel; s];
            rules.extend(vec![LayoutRule::Free; factors.len() - s]);
            out.push(Candidate {
                factors: factors.clone(),
                rules,
                label: Some(format!(
                    "data parallel {} × recursion {}",
                    factors[..s].iter().product::<usize>(),
                    factors[s..]
                        .iter()
                        .map(|f| f.to_string())
                        .collect::<Vec<_>>()
                        .join("·")
                )),
                only_if_fits: false,
            });
        }
        // Megatron-LM's plans (tensor parallelism inside t workers, data
        // parallelism across k/t; t = 1 is the data-parallel candidate
        // above), laid out by the same DP: the baseline is in the space, so
        // no Megatron-style plan moves fewer bytes than the one kept.
        out.extend(
            Megatron
                .candidates(
                    workers,
                    &PlanOptions {
                        tensor_parallel: None,
                        ..*opts
                    },
                )
                .into_iter()
                .filter(|c| c.rules.contains(&LayoutRule::TensorParallel)),
        );
        out
    }
}
