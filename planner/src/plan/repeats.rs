//! Repeated blocks of operators in graph order (issue 41 item 3): the
//! layers of a real export whose node names carry no layer index.
//!
//! Takes a graph; gives, per operator, its place in a repeated block —
//! which block run and which offset inside the block — or nothing. An
//! operator's *signature* is its name with every digit run replaced by `#`
//! (`node_MatMul_155` → `node_MatMul_#`), its spec, attributes, and its
//! inputs' and outputs' shapes; a *run* is a stretch of the operator list
//! whose signatures repeat with a period `p`, `reps ≥ 2` times in a row
//! (BERT-base exported by torch.onnx: its 12 encoder layers, 49 forward
//! operators each, and their backward operators, another run). Runs are
//! kept greedily, the one covering most operators first, without overlap;
//! periods are at most [`MAX_PERIOD`] operators. Operators at one offset of
//! one run are the same operator of different layers: the summary folds
//! them into one line ([`super::op_groups::group_ops`]).

use std::collections::BTreeMap;

use crate::graph::Graph;

/// The longest block looked for, in operators (a LLaMA-7B layer with its
/// backward is a few hundred): keeps the search at most `n · MAX_PERIOD`
/// comparisons.
pub const MAX_PERIOD: usize = 2048;

/// Where an operator sits in a repeated block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlockPlace {
    /// The run, numbered in the order the runs were kept.
    pub run: usize,
    /// The offset inside the block (`0..period`).
    pub offset: usize,
}

/// `name` with every run of ASCII digits replaced by `#`.
pub fn skeleton(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// Per operator of `graph` (graph order), its place in a repeated block,
/// if it is in one (see the module doc).
pub fn block_places(graph: &Graph) -> Vec<Option<BlockPlace>> {
    let mut ids: BTreeMap<String, u32> = BTreeMap::new();
    let sigs: Vec<u32> = graph
        .ops()
        .iter()
        .map(|op| {
            let shapes = |ts: &[crate::graph::TensorId]| {
                ts.iter()
                    .map(|&t| format!("{:?}", graph.tensor(t).shape))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let key = format!(
                "{}|{}|{:?}|{}|{}",
                skeleton(&op.name),
                op.spec,
                op.attrs,
                shapes(&op.inputs),
                shapes(&op.outputs)
            );
            let next = ids.len() as u32;
            *ids.entry(key).or_insert(next)
        })
        .collect();
    places(&sigs)
}

/// The runs of `sigs` (see the module doc), as places per position.
pub fn places(sigs: &[u32]) -> Vec<Option<BlockPlace>> {
    let n = sigs.len();
    // Every maximal stretch where sigs[i] == sigs[i + p], long enough for
    // two blocks: (covered positions, period, start, repetitions).
    let mut runs: Vec<(usize, usize, usize, usize)> = Vec::new();
    for p in 1..=(n / 2).min(MAX_PERIOD) {
        let mut i = 0;
        while i + p < n {
            if sigs[i] != sigs[i + p] {
                i += 1;
                continue;
            }
            let start = i;
            while i + p < n && sigs[i] == sigs[i + p] {
                i += 1;
            }
            let reps = (i - start + p) / p;
            if reps >= 2 {
                runs.push((reps * p, p, start, reps));
            }
        }
    }
    // Most covered first; then the shorter period (more repetitions),
    // then the earlier start.
    runs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut out = vec![None; n];
    let mut kept = 0;
    for (covered, p, start, _) in runs {
        let span = start..start + covered;
        if out[span.clone()].iter().any(Option::is_some) {
            continue;
        }
        for i in span {
            out[i] = Some(BlockPlace {
                run: kept,
                offset: (i - start) % p,
            });
        }
        let block = &sigs[start..start + p];
        extend(sigs, &mut out, block, kept, start, false);
        extend(sigs, &mut out, block, kept, start + covered, true);
        kept += 1;
    }
    out
}

/// Operators a block next to a run may have that the run's blocks lack
/// (the first layer of an export also computes the attention mask):
/// skipped when the neighbour is matched to the block.
const LOOKAHEAD: usize = 16;

/// Match the block before `at` (`after` false) or from `at` on (`after`
/// true) to `block` (the run's signatures by offset) in order, skipping
/// up to [`LOOKAHEAD`] operators for each offset, and keep the match as
/// one more repetition of run `run` if at least half the offsets match:
/// the first or last layer, whose operators differ a little (it reads the
/// embedding, or feeds the head), joins the others.
fn extend(
    sigs: &[u32],
    out: &mut [Option<BlockPlace>],
    block: &[u32],
    run: usize,
    at: usize,
    after: bool,
) {
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut pos = at;
    let offsets: Box<dyn Iterator<Item = usize>> = if after {
        Box::new(0..block.len())
    } else {
        Box::new((0..block.len()).rev())
    };
    for offset in offsets {
        let candidates: Vec<usize> = if after {
            (pos..sigs.len().min(pos + LOOKAHEAD)).collect()
        } else {
            (pos.saturating_sub(LOOKAHEAD)..pos).rev().collect()
        };
        let hit = candidates
            .into_iter()
            .find(|&j| out[j].is_none() && sigs[j] == block[offset]);
        if let Some(j) = hit {
            found.push((j, offset));
            pos = if after { j + 1 } else { j };
        }
    }
    if 2 * found.len() >= block.len() {
        for (j, offset) in found {
            out[j] = Some(BlockPlace { run, offset });
        }
    }
}

/// The names of one block offset's operators as one line: digit runs
/// that differ between the names become `{first,second,…}` (the first two
/// members' numbers, so the stride shows), the rest is kept. The names
/// share one [`skeleton`].
pub fn block_pattern(names: &[&str]) -> String {
    let Some(first) = names.first() else {
        return String::new();
    };
    let parts: Vec<Vec<&str>> = names.iter().map(|n| digit_parts(n)).collect();
    let mut out = String::new();
    for (j, part) in parts[0].iter().enumerate() {
        let varies = parts.iter().any(|p| p.get(j) != Some(part));
        if varies && part.bytes().all(|b| b.is_ascii_digit()) {
            let second = parts.get(1).and_then(|p| p.get(j)).unwrap_or(part);
            let more = if names.len() > 2 { ",…" } else { "" };
            out.push_str(&format!("{{{part},{second}{more}}}"));
        } else {
            out.push_str(part);
        }
    }
    if out.is_empty() {
        first.to_string()
    } else {
        out
    }
}

/// `name` cut into alternating runs of digits and non-digits.
fn digit_parts(name: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let bytes = name.as_bytes();
    for i in 1..=bytes.len() {
        if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[i - 1].is_ascii_digit() {
            parts.push(&name[start..i]);
            start = i;
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_periodic_stretch_is_one_run_and_the_rest_stays() {
        // x, then [a b c d] three times, then y.
        let sigs = [9, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 8];
        let got = places(&sigs);
        assert_eq!(got[0], None);
        assert_eq!(got[13], None);
        for (i, place) in got.iter().enumerate().take(13).skip(1) {
            let (run, offset) = (0, (i - 1) % 4);
            assert_eq!(*place, Some(BlockPlace { run, offset }));
        }
    }

    #[test]
    fn a_first_block_with_an_extra_operator_joins_the_run() {
        // [a b x c d] then [a b c d] twice: x is the first layer's extra
        // op. Every other position is placed, and two positions share an
        // offset exactly when they share a signature.
        let sigs = [1, 2, 7, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4];
        let got = places(&sigs);
        assert_eq!(got[2], None);
        for i in (0..sigs.len()).filter(|&i| i != 2) {
            let pi = got[i].expect("placed");
            for j in (0..sigs.len()).filter(|&j| j != 2) {
                let pj = got[j].expect("placed");
                assert_eq!(pi.run, pj.run);
                assert_eq!(pi.offset == pj.offset, sigs[i] == sigs[j], "{i} {j}");
            }
        }
    }

    #[test]
    fn names_fold_their_varying_numbers() {
        assert_eq!(skeleton("bwd/node_MatMul_155/w"), "bwd/node_MatMul_#/w");
        assert_eq!(
            block_pattern(&[
                "bwd/node_MatMul_155/w",
                "bwd/node_MatMul_228/w",
                "bwd/node_MatMul_301/w"
            ]),
            "bwd/node_MatMul_{155,228,…}/w"
        );
        assert_eq!(block_pattern(&["n_1/2", "n_7/2"]), "n_{1,7}/2");
        assert_eq!(block_pattern(&["fc3"]), "fc3");
    }
}
