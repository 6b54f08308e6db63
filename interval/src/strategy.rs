//! What the analysis finds for one op: its partition strategies.
//!
//! Takes nothing (plain data); gives [`OpStrategies`], the shape-free result
//! for one op type and ellipsis rank: every exact [`Strategy`] (Tofu §3.2,
//! case 1 "split an output dim" and case 2 "split a reduction, then reduce"),
//! every [`Rejected`] candidate with the reason, and whether the op is
//! elementwise. Regions are symbolic ([`DimRegion`]);
//! [`OpStrategies::instantiate`] evaluates them for concrete shapes.
//!
//! Semantics for ops with several outputs: one strategy splits every output
//! statement into the same parts — each statement picks one variable (an
//! output coordinate, case 1, or a variable of its top-level reduction,
//! case 2), all with the same symbolic extent, and every statement's regions
//! must be exact. An input's region is the union over every statement.

use serde::Serialize;
use tdl::{DimExpr, OpSpec, Reducer, VarId};

use crate::canon::Saturation;
use crate::interval::DimRegion;

/// How one output statement is split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SplitKind {
    /// Case 1: the variable is the output coordinate at `axis`; each part
    /// computes its slice of the output.
    Output {
        /// Output axis.
        axis: u32,
    },
    /// Case 2: the variable is bound by the statement's top-level reduction;
    /// each part computes a partial output, combined with `reducer`.
    Reduction {
        /// The combining reducer.
        reducer: Reducer,
    },
}

/// The variable one output statement is split along.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitVar {
    /// Which output the statement defines.
    pub output: u32,
    /// The variable (of the expanded spec).
    pub var: VarId,
    /// Its name as written (`_e{i}` for ellipsis variables).
    pub name: String,
    /// Case 1 or case 2.
    pub kind: SplitKind,
}

/// Layout of an output under a strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum OutputLayout {
    /// Split along `axis`; part i holds its slice.
    Split {
        /// Output axis.
        axis: u32,
    },
    /// Every part holds a partial whole output; the result is their reduction.
    Partial {
        /// How partials combine.
        reducer: Reducer,
    },
}

/// Layout of an input under a strategy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum InputLayout {
    /// Aligned with the parts along these dims (usually one).
    Split {
        /// Input dims.
        dims: Vec<u32>,
    },
    /// Every part reads the same region.
    Replicated,
    /// Not read at all.
    Unused,
}

/// The symbolic region of one input: one [`DimRegion`] per dim, or `None`
/// when the op does not read the input.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputRegion {
    /// Per dim, or `None` if unread.
    pub dims: Option<Vec<DimRegion>>,
    /// Which elements of the region a part actually reads depends on tensor
    /// data (a data-dependent index, or a read guarded by a condition on
    /// data): the region is what the part must hold, a superset of its reads.
    pub data_dependent: bool,
}

impl InputRegion {
    /// The layout this region implies.
    pub fn layout(&self) -> InputLayout {
        match &self.dims {
            None => InputLayout::Unused,
            Some(d) => {
                let split: Vec<u32> = d
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.is_split())
                    .map(|(i, _)| i as u32)
                    .collect();
                if split.is_empty() {
                    InputLayout::Replicated
                } else {
                    InputLayout::Split { dims: split }
                }
            }
        }
    }
}

/// One exact partition strategy of an op (shape-free).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Strategy {
    /// Short name: `split m`, `reduce k (Sum)`, or one entry per output.
    pub name: String,
    /// The extent the parts divide (range of the split variables).
    pub extent: DimExpr,
    /// The split variable of each output statement, in output order.
    pub splits: Vec<SplitVar>,
    /// The region of each input, in input order.
    pub inputs: Vec<InputRegion>,
}

impl Strategy {
    /// Layout of output `o`.
    pub fn output_layout(&self, o: u32) -> OutputLayout {
        let s = self
            .splits
            .iter()
            .find(|s| s.output == o)
            .expect("one split per output");
        match s.kind {
            SplitKind::Output { axis } => OutputLayout::Split { axis },
            SplitKind::Reduction { reducer } => OutputLayout::Partial { reducer },
        }
    }

    /// Whether some output is partial (case 2).
    pub fn has_reduction(&self) -> bool {
        self.splits
            .iter()
            .any(|s| matches!(s.kind, SplitKind::Reduction { .. }))
    }
}

/// A candidate split that is not exact, with the reason (Tofu rejects it:
/// no redundant computation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rejected {
    /// Candidate name, as for [`Strategy::name`].
    pub name: String,
    /// Why its regions are not exact.
    pub reason: String,
}

/// Every strategy of one op type at one ellipsis rank (see the module doc).
#[derive(Clone, Debug)]
pub struct OpStrategies {
    /// The analysed spec (ellipsis expanded).
    pub spec: OpSpec,
    /// Exact strategies, in candidate order (output 0's axes, then its reductions).
    pub strategies: Vec<Strategy>,
    /// Rejected candidates.
    pub rejected: Vec<Rejected>,
    /// Every output element reads exactly the same-index element of every input
    /// (no reduction, no broadcast, no opaque function); used for coarsening.
    pub elementwise: bool,
    /// Why egg stopped canonicalising the op's index expressions, the worst
    /// over them: a limit means some index kept the best form found within
    /// the limits (a candidate it leaves imprecise is rejected, never wrong).
    pub saturation: Saturation,
}

impl OpStrategies {
    /// Op name.
    pub fn op(&self) -> &str {
        &self.spec.name
    }

    /// A strategy by name.
    pub fn get(&self, name: &str) -> Option<&Strategy> {
        self.strategies.iter().find(|s| s.name == name)
    }
}
