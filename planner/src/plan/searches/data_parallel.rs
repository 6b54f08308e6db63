//! `data-parallel`: the classic baseline (Tofu §6.3).

use super::{LayoutRule, Search};

/// Data parallelism: batch split, weights, their gradients and optimizer
/// state replicated, gradients all-reduced; at every level of the prime
/// factors of k.
pub struct DataParallel;

impl Search for DataParallel {
    fn name(&self) -> &'static str {
        "data-parallel"
    }

    fn rule(&self) -> LayoutRule {
        LayoutRule::DataParallel
    }
}
