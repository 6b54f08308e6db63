//! A data set's batches, fed tile by tile: each rank gets only its own
//! tile of every graph input the data feeds (the plan says how they are
//! split), and the loss is read back after each step.
//!
//! Takes the training part of a data set ([`Samples`]: features and class
//! ids, or byte ids and next-byte ids), its [`Batches`] and the graph tensors
//! it feeds with one sample's shape in each (class ids one-hot encoded for a
//! graph whose labels are dense probabilities); gives a
//! [`runner::StepFeed`] and, after the run, the loss of every step; with a
//! [`Capture`], the tiles of the carried tensors after every checkpoint or
//! evaluation step.

use std::borrow::Cow;
use std::sync::Mutex;

use codegen::{Program, Region, TensorId};
use runner::StepFeed;

use crate::batches::Batches;
use crate::checkpoint::Capture;
use crate::samples::Samples;

/// The graph tensors a data set is trained through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskTensors {
    /// Each fed input, in [`Samples::inputs`] order, with one sample's
    /// shape in it (the input is `[batch, sample...]`).
    pub inputs: Vec<(TensorId, Vec<usize>)>,
    /// Per fed input, in the same order: `Some(classes)` where the data
    /// gives class ids and the graph takes them one-hot encoded over that
    /// many classes (a graph with dense labels `[batch, …, classes]`).
    pub one_hot: Vec<Option<usize>>,
    /// The scalar loss.
    pub loss: TensorId,
}

impl TaskTensors {
    /// Sample `i`'s values of fed input `k` (the data's input `k`) as the
    /// graph takes them: the data's values, or its class ids one-hot
    /// encoded ([`one_hot`]).
    pub fn sample<'a>(&self, data: &'a dyn Samples, i: usize, k: usize) -> Cow<'a, [f32]> {
        let v = data.sample(i, k);
        match self.one_hot.get(k).copied().flatten() {
            Some(classes) => one_hot(&v, classes).into(),
            None => v,
        }
    }
}

/// Class ids `[targets]` as one-hot rows `[targets, classes]`; an id that is
/// no class (PyTorch's ignore_index -100) gives a row of zeros.
pub fn one_hot(ids: &[f32], classes: usize) -> Vec<f32> {
    let mut v = vec![0.0; ids.len() * classes];
    for (r, &id) in ids.iter().enumerate() {
        if id >= 0.0 && (id as usize) < classes && id.fract() == 0.0 {
            v[r * classes + id as usize] = 1.0;
        }
    }
    v
}

/// The tile `region` of a batch tensor `[rows, sample...]` whose row `i`
/// is `row(i)` (one sample, row-major in `sample`'s shape).
///
/// Errors: a message when the region does not fit the sample's shape.
fn tile<'a>(
    region: &Region,
    sample: &[usize],
    row: impl Fn(usize) -> std::borrow::Cow<'a, [f32]>,
) -> Result<Vec<f32>, String> {
    let (rows, rest) = (region.0[0], &region.0[1..]);
    let whole: Vec<(i64, i64)> = sample.iter().map(|&d| (0, d as i64)).collect();
    let n: usize = rest.iter().map(|&(l, h)| (h - l).max(0) as usize).product();
    let mut out = vec![0.0; (rows.1 - rows.0).max(0) as usize * n];
    for (k, i) in (rows.0..rows.1).enumerate() {
        let dst = &mut out[k * n..(k + 1) * n];
        runner::region::copy_region(&row(i as usize), &whole, dst, rest, rest, None)
            .map_err(|e| format!("a batch tile {:?}: {e}", region.0))?;
    }
    Ok(out)
}

/// The feed of one training run (see the module doc).
pub struct BatchFeed<'d> {
    data: &'d dyn Samples,
    batches: Batches,
    tensors: &'d TaskTensors,
    capture: Option<&'d Capture>,
    /// Loss per step, set by the rank that keeps it.
    losses: Mutex<Vec<Option<f32>>>,
    /// Steps before the first one this run takes (a resumed run).
    first_step: usize,
}

impl<'d> BatchFeed<'d> {
    /// A feed of `steps` steps of `batches` over `data` into `tensors`,
    /// starting at global step `first_step`, capturing into `capture`.
    pub fn new(
        data: &'d dyn Samples,
        batches: Batches,
        tensors: &'d TaskTensors,
        (first_step, steps): (usize, usize),
        capture: Option<&'d Capture>,
    ) -> BatchFeed<'d> {
        BatchFeed {
            data,
            batches,
            tensors,
            capture,
            losses: Mutex::new(vec![None; steps]),
            first_step,
        }
    }

    /// The loss of each step run so far (`None`: not run, or not kept here).
    pub fn losses(&self) -> Vec<Option<f32>> {
        self.losses.lock().expect("no poisoned loss log").clone()
    }

    /// The loss of step `step` of this run, once a rank has reported it.
    pub fn loss(&self, step: usize) -> Option<f32> {
        self.losses.lock().expect("no poisoned loss log")[step]
    }
}

impl StepFeed for BatchFeed<'_> {
    fn feed(
        &self,
        step: usize,
        program: &Program,
    ) -> Result<Vec<(TensorId, Region, Vec<f32>)>, String> {
        if let Some(e) = self.capture.and_then(Capture::failed) {
            return Err(e);
        }
        let idx = self.batches.batch(self.first_step + step);
        let mut out = Vec::new();
        for (k, (t, sample)) in self.tensors.inputs.iter().enumerate() {
            if let Some(r) = program.tile_region(*t) {
                let v = tile(&r, sample, |i| self.tensors.sample(self.data, idx[i], k))?;
                out.push((*t, r, v));
            }
        }
        Ok(out)
    }

    fn watched(&self, step: usize) -> Vec<TensorId> {
        let mut w = vec![self.tensors.loss];
        if let Some(c) = self.capture.filter(|c| c.due(self.first_step + step)) {
            w.extend(c.carried.iter().map(|&(from, _)| from));
        }
        w
    }

    fn observe(&self, step: usize, rank: usize, tensor: TensorId, region: &Region, values: &[f32]) {
        if tensor == self.tensors.loss {
            let mut l = self.losses.lock().expect("no poisoned loss log");
            if l[step].is_none() {
                l[step] = values.first().copied();
            }
        } else if let Some(c) = self.capture {
            c.record(rank, tensor, region, values);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tile_is_its_rows_and_columns() {
        let rows: Vec<Vec<f32>> = (0..4)
            .map(|i| (0..3).map(|j| (10 * i + j) as f32).collect())
            .collect();
        let r = Region(vec![(1, 3), (1, 3)]);
        let v = tile(&r, &[3], |i| rows[i].as_slice().into()).unwrap();
        assert_eq!(v, vec![11.0, 12.0, 21.0, 22.0]);
    }

    #[test]
    fn an_image_tile_is_its_rows_and_window() {
        // Samples of shape [1, 2, 3]: value 100·i + 10·h + w.
        let rows: Vec<Vec<f32>> = (0..3)
            .map(|i| {
                (0..6)
                    .map(|k| (100 * i + 10 * (k / 3) + k % 3) as f32)
                    .collect()
            })
            .collect();
        let r = Region(vec![(2, 3), (0, 1), (1, 2), (0, 2)]);
        let v = tile(&r, &[1, 2, 3], |i| rows[i].as_slice().into()).unwrap();
        assert_eq!(v, vec![210.0, 211.0]);
        let e = tile(
            &Region(vec![(0, 1), (0, 1), (0, 3), (0, 3)]),
            &[1, 2, 3],
            |i| rows[i].as_slice().into(),
        );
        assert!(e.is_err());
    }
}
