//! The first line of `tofu train`: the model, its workers and plan bytes,
//! the samples and the steps to run.

use std::fmt;

use crate::Prepared;

/// What a run trains, on what, and for which steps.
#[derive(Clone, Copy)]
pub struct Header<'a> {
    /// The prepared model and programs.
    pub prep: &'a Prepared,
    /// Training samples.
    pub train_samples: usize,
    /// Held-out samples.
    pub test_samples: usize,
    /// The first step run.
    pub start: usize,
    /// The step the run stops before.
    pub steps: usize,
}

/// One line: model, workers (factors), batch, plan bytes per step,
/// samples, steps.
impl fmt::Display for Header<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prep = self.prep;
        writeln!(
            f,
            "{} on {} worker(s) (factors {:?}), batch {}, {} plan bytes per step; {} training / {} held-out samples, steps {}..{}",
            prep.graph.name(),
            prep.world(),
            prep.factors,
            prep.batch,
            prep.comm_bytes,
            self.train_samples,
            self.test_samples,
            self.start,
            self.steps
        )
    }
}
