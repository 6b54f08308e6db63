//! A classifier's batches, fed tile by tile: each rank gets only its own
//! tile of the step's features and one-hot labels (the plan says how the
//! graph inputs are split), and the loss is read back after each step.
//!
//! Takes the training part of a [`DataSet`], its [`Batches`] and the graph's
//! input tensors `x[batch, features]` and `labels[batch, classes]`
//! (probabilities: one-hot rows); gives a [`runner::StepFeed`] and, after
//! the run, the loss of every step; with a [`Capture`], the tiles of the
//! carried tensors after every checkpoint step.

use std::sync::Mutex;

use codegen::{Program, Region, TensorId};
use runner::StepFeed;

use crate::batches::Batches;
use crate::checkpoint::Capture;
use crate::data::DataSet;

/// The graph tensors a classifier is trained through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassifierTensors {
    /// Features `x[batch, features]`.
    pub x: TensorId,
    /// One-hot labels `labels[batch, classes]`.
    pub labels: TensorId,
    /// The scalar loss.
    pub loss: TensorId,
}

/// Rows `[r0, r1)` × columns `[c0, c1)` of a row-major `[rows, cols]`
/// matrix given row by row (`row(i)` is sample `i`'s whole row).
fn tile<'a>(region: &Region, row: impl Fn(usize) -> std::borrow::Cow<'a, [f32]>) -> Vec<f32> {
    let (r, c) = (region.0[0], region.0[1]);
    let mut out = Vec::with_capacity(region.volume() as usize);
    for i in r.0..r.1 {
        out.extend_from_slice(&row(i as usize)[c.0 as usize..c.1 as usize]);
    }
    out
}

/// The feed of one training run (see the module doc).
pub struct ClassifierFeed<'d> {
    data: &'d DataSet,
    batches: Batches,
    tensors: ClassifierTensors,
    capture: Option<&'d Capture>,
    /// Loss per step, set by the rank that keeps it.
    losses: Mutex<Vec<Option<f32>>>,
    /// Steps before the first one this run takes (a resumed run).
    first_step: usize,
}

impl<'d> ClassifierFeed<'d> {
    /// A feed of `steps` steps of `batches` over `data`, starting at global
    /// step `first_step`, capturing checkpoints into `capture`.
    pub fn new(
        data: &'d DataSet,
        batches: Batches,
        tensors: ClassifierTensors,
        (first_step, steps): (usize, usize),
        capture: Option<&'d Capture>,
    ) -> ClassifierFeed<'d> {
        ClassifierFeed {
            data,
            batches,
            tensors,
            capture,
            losses: Mutex::new(vec![None; steps]),
            first_step,
        }
    }

    /// The loss of each step run so far (`None`: not run).
    pub fn losses(&self) -> Vec<Option<f32>> {
        self.losses.lock().expect("no poisoned loss log").clone()
    }

    /// The loss of step `step` of this run, once a rank has reported it.
    pub fn loss(&self, step: usize) -> Option<f32> {
        self.losses.lock().expect("no poisoned loss log")[step]
    }
}

impl StepFeed for ClassifierFeed<'_> {
    fn feed(
        &self,
        step: usize,
        program: &Program,
    ) -> Result<Vec<(TensorId, Region, Vec<f32>)>, String> {
        if let Some(e) = self.capture.and_then(Capture::failed) {
            return Err(e);
        }
        let idx = self.batches.batch(self.first_step + step);
        let classes = self.data.classes;
        let mut out = Vec::new();
        if let Some(r) = program.tile_region(self.tensors.x) {
            let v = tile(&r, |i| self.data.row(idx[i]).into());
            out.push((self.tensors.x, r, v));
        }
        if let Some(r) = program.tile_region(self.tensors.labels) {
            let v = tile(&r, |i| {
                let mut row = vec![0.0; classes];
                row[self.data.y[idx[i]]] = 1.0;
                row.into()
            });
            out.push((self.tensors.labels, r, v));
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
        let v = tile(&r, |i| rows[i].as_slice().into());
        assert_eq!(v, vec![11.0, 12.0, 21.0, 22.0]);
    }
}
