//! The seeded train/held-out split of MovieLens-style ratings (read by
//! `datasets::movielens`, the one reader of RecBole `.inter` files).
//!
//! Takes [`Ratings`]; gives [`split`]'s two sets.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

pub use datasets::movielens::{Rating, Ratings};

/// Splits ratings into training and held-out sets: a seeded shuffle, the
/// first `train_fraction` for training.
pub fn split(data: &Ratings, train_fraction: f64, seed: u64) -> (Vec<Rating>, Vec<Rating>) {
    let mut all = data.ratings.clone();
    all.shuffle(&mut StdRng::seed_from_u64(seed));
    let n = (all.len() as f64 * train_fraction).round() as usize;
    let test = all.split_off(n.min(all.len()));
    (all, test)
}
