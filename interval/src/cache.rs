//! The strategy cache: analyse each op type once per ellipsis rank.
//!
//! Takes op specs (from a [`tdl::Library`] or directly); gives shared
//! [`OpStrategies`] keyed by op name and ellipsis rank (Tofu §3.2: the
//! analysis is shape-free, so a graph with thousands of operators of a few
//! dozen types analyses each type once). Errors are cached too, so a spec the
//! analysis cannot handle is reported once per key, not re-analysed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tdl::{Library, OpSpec};

use crate::analysis::analyse;
use crate::error::AnalysisError;
use crate::strategy::OpStrategies;

/// One cached analysis result.
type Entry = Result<Arc<OpStrategies>, AnalysisError>;

/// Cache of analysis results keyed by `(op name, ellipsis rank)`; a spec
/// without an ellipsis has rank 0. Safe to share between threads.
#[derive(Default)]
pub struct StrategyCache {
    map: Mutex<HashMap<(String, u32), Entry>>,
}

impl StrategyCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The strategies of `spec` (unexpanded, as in the library) for `rank`
    /// ellipsis dims, analysed on first use.
    ///
    /// Errors: the [`AnalysisError`] of the spec, if any.
    pub fn get(&self, spec: &OpSpec, rank: u32) -> Result<Arc<OpStrategies>, AnalysisError> {
        let rank = if spec.has_ellipsis() { rank } else { 0 };
        let key = (spec.name.clone(), rank);
        if let Some(r) = self.map.lock().expect("cache lock").get(&key) {
            return r.clone();
        }
        let r = analyse(&spec.expand_ellipsis(rank as usize)).map(Arc::new);
        self.map.lock().expect("cache lock").insert(key, r.clone());
        r
    }

    /// The strategies of the op that takes these input shapes (the rank is
    /// read from them, see [`tdl::OpSpec::ellipsis_rank_for`]).
    ///
    /// Errors: the spec's [`AnalysisError`], or a rank error as
    /// [`AnalysisError::Unsupported`] naming the op.
    pub fn for_shapes(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
    ) -> Result<Arc<OpStrategies>, AnalysisError> {
        let rank =
            spec.ellipsis_rank_for(input_shapes)
                .map_err(|e| AnalysisError::Unsupported {
                    op: spec.name.clone(),
                    expr: format!("{input_shapes:?}"),
                    what: e.to_string(),
                })?;
        self.get(spec, rank as u32)
    }

    /// Analyse every op of a library at `rank` ellipsis dims; gives the
    /// results in library (name) order.
    pub fn analyse_library(&self, lib: &Library, rank: u32) -> Vec<(String, Entry)> {
        lib.ops()
            .map(|op| (op.name.clone(), self.get(op, rank)))
            .collect()
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.map.lock().expect("cache lock").len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
