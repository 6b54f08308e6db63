//! The loops benchmark (`tofu loops bench`): SGD MF on MovieLens-100K
//! (90/10 split, seed 1, rank 16), the median seconds per epoch of the
//! dependence-aware schedule on 1, 2 and 4 workers, and the epochs each of
//! the dependence-aware schedule and data parallelism (one sync per epoch)
//! takes on 4 workers to reach a held-out RMSE.
//!
//! Takes the ratings and the epoch counts; gives a [`Bench`]. Progress
//! `(workers, schedule, epoch, held-out RMSE, seconds)` after each epoch.

use datasets::movielens::Ratings;

use super::mf::{self, MfConfig, MfReport, MfSchedule};
use crate::{Choice, LoopError};

/// What the benchmark measured.
#[derive(Clone, Debug)]
pub struct Bench {
    /// Per worker count (1, 2, 4): the schedule that ran and its median
    /// seconds per epoch over the timed epochs.
    pub times: Vec<(usize, String, f64)>,
    /// The dependence-aware run on 4 workers.
    pub orion: MfReport,
    /// The data-parallel run on 4 workers.
    pub data_parallel: MfReport,
    /// Epochs to the target of `orion` and `data_parallel` (`None`: not
    /// within the epochs tried).
    pub epochs_to_target: (Option<usize>, Option<usize>),
}

/// Runs the benchmark: `epochs` timed per worker count, at most
/// `max_epochs` to reach held-out RMSE `target`.
///
/// Errors: a run's [`LoopError`].
pub fn bench(
    data: &Ratings,
    (epochs, max_epochs, target): (usize, usize, f64),
    progress: &mut dyn FnMut(usize, MfSchedule, usize, f64, f64),
) -> Result<Bench, LoopError> {
    let (train, test) = mf::split(&mf::widen(&data.ratings), 0.1, 1);
    let mut go = |workers: usize, schedule: MfSchedule, epochs: usize| {
        let cfg = MfConfig {
            workers,
            schedule,
            epochs,
            ..Default::default()
        };
        let (users, items) = (data.users as usize, data.items as usize);
        mf::train(&train, &test, users, items, &cfg, &mut |e, _, ho, s| {
            progress(workers, schedule, e, ho, s)
        })
    };
    let mut times = vec![];
    for w in [1usize, 2, 4] {
        let r = go(w, MfSchedule::Orion(Choice::Auto), epochs)?;
        times.push((w, r.schedule.clone(), median(&r.seconds)));
    }
    let orion = go(4, MfSchedule::Orion(Choice::Auto), max_epochs)?;
    let data_parallel = go(4, MfSchedule::DataParallel { syncs: 1 }, max_epochs)?;
    let epochs_to_target = (
        epochs_to(&orion.heldout_rmse, target),
        epochs_to(&data_parallel.heldout_rmse, target),
    );
    Ok(Bench {
        times,
        orion,
        data_parallel,
        epochs_to_target,
    })
}

/// The first epoch (from 1) whose held-out RMSE is at most `target`.
pub fn epochs_to(heldout: &[f64], target: f64) -> Option<usize> {
    heldout.iter().position(|&x| x <= target).map(|p| p + 1)
}

/// The median (the upper one of an even count; NaN when empty).
pub fn median(x: &[f64]) -> f64 {
    let mut v = x.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_epochs_to_target() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(&[]).is_nan());
        assert_eq!(epochs_to(&[1.2, 0.96, 0.94, 0.9], 0.95), Some(3));
        assert_eq!(epochs_to(&[1.2, 0.96], 0.95), None);
    }
}
