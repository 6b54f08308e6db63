//! `allrow-greedy`: the AllRow-Greedy baseline (Tofu §6.3).

use super::{LayoutRule, Search};

/// Every tensor split along its first dim; operators choose the cheapest
/// strategy (CriticalDP over the op choices that remain).
pub struct AllrowGreedy;

impl Search for AllrowGreedy {
    fn name(&self) -> &'static str {
        "allrow-greedy"
    }

    fn rule(&self) -> LayoutRule {
        LayoutRule::AllRow
    }
}
