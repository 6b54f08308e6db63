//! The order samples are visited in: epochs of seeded shuffles, cut into
//! whole batches.
//!
//! Takes the number of training samples, the batch size (the graph's batch
//! dimension) and a seed; gives, for any step, the epoch and the sample
//! indices of its batch. A step's batch depends only on (seed, step), so
//! every rank computes it alone and a resumed run continues with the same
//! batches. The last `samples mod batch` samples of each epoch's
//! permutation are left out of that epoch (the graph's shapes are fixed);
//! each epoch draws a new permutation, so every sample is seen.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Epochs of seeded permutations cut into batches (see the module doc).
#[derive(Clone, Debug)]
pub struct Batches {
    samples: usize,
    batch: usize,
    seed: u64,
}

impl Batches {
    /// Batches of `batch` of `samples` samples; `None` when there is not one
    /// whole batch (`batch == 0` or `batch > samples`).
    pub fn new(samples: usize, batch: usize, seed: u64) -> Option<Batches> {
        (batch > 0 && batch <= samples).then_some(Batches {
            samples,
            batch,
            seed,
        })
    }

    /// Whole batches per epoch.
    pub fn per_epoch(&self) -> usize {
        self.samples / self.batch
    }

    /// Epoch (0-based) of step `step`.
    pub fn epoch_of(&self, step: usize) -> usize {
        step / self.per_epoch()
    }

    /// The permutation of epoch `epoch` (its own stream of the seed).
    fn permutation(&self, epoch: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.samples).collect();
        let stream = self.seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        order.shuffle(&mut StdRng::seed_from_u64(stream));
        order
    }

    /// The sample indices of step `step`'s batch (`batch` of them).
    pub fn batch(&self, step: usize) -> Vec<usize> {
        let i = step % self.per_epoch();
        self.permutation(self.epoch_of(step))[i * self.batch..(i + 1) * self.batch].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_visits_distinct_samples_and_epochs_differ() {
        let b = Batches::new(10, 3, 5).unwrap();
        assert_eq!(b.per_epoch(), 3);
        let mut seen: Vec<usize> = (0..3).flat_map(|s| b.batch(s)).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 9, "9 distinct samples in one epoch of 3 × 3");
        assert_eq!(b.epoch_of(3), 1);
        let e0: Vec<usize> = (0..3).flat_map(|s| b.batch(s)).collect();
        let e1: Vec<usize> = (3..6).flat_map(|s| b.batch(s)).collect();
        assert_ne!(e0, e1, "each epoch reshuffles");
        assert_eq!(b.batch(4), Batches::new(10, 3, 5).unwrap().batch(4));
        assert_ne!(b.batch(0), Batches::new(10, 3, 6).unwrap().batch(0));
    }

    #[test]
    fn no_whole_batch_is_none() {
        assert!(Batches::new(2, 3, 0).is_none());
        assert!(Batches::new(2, 0, 0).is_none());
    }
}
