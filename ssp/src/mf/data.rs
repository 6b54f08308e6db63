//! The seeded train/held-out split of MovieLens-style ratings (read by
//! `datasets::movielens`, the one reader of RecBole `.inter` files), and
//! the ratings of a run (`--data FILE` or the cached MovieLens-100K) split
//! 90/10 ([`load_split`]).
//!
//! Takes [`Ratings`] or a file; gives [`split`]'s two sets.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

pub use datasets::movielens::{Rating, Ratings};

use datasets::movielens::{default_path, load};

/// Splits ratings into training and held-out sets: a seeded shuffle, the
/// first `train_fraction` for training.
pub fn split(data: &Ratings, train_fraction: f64, seed: u64) -> (Vec<Rating>, Vec<Rating>) {
    let mut all = data.ratings.clone();
    all.shuffle(&mut StdRng::seed_from_u64(seed));
    let n = (all.len() as f64 * train_fraction).round() as usize;
    let test = all.split_off(n.min(all.len()));
    (all, test)
}

/// Why a run's ratings could not be loaded (the messages name the flag and
/// the script that fetches the default file).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No `--data` and the cached MovieLens-100K file is missing.
    #[error("{} is missing: run scripts/fetch-movielens.sh (or pass --data FILE)", .0.display())]
    Missing(PathBuf),
    /// The file cannot be read or parsed.
    #[error("--data: {0}")]
    Read(#[from] datasets::DataError),
}

/// The ratings of `data` (default: the cached MovieLens-100K,
/// [`datasets::movielens::default_path`]) and their training and held-out
/// sets, split 90/10 with `seed`.
///
/// Errors: [`LoadError::Missing`] when the default file is missing,
/// [`LoadError::Read`] when the file is unreadable or malformed.
pub fn load_split(
    data: Option<&Path>,
    seed: u64,
) -> Result<(Ratings, Vec<Rating>, Vec<Rating>), LoadError> {
    let file = match data {
        Some(f) => f.to_path_buf(),
        None => default_path(),
    };
    if data.is_none() && !file.is_file() {
        return Err(LoadError::Missing(file));
    }
    let ratings = load(&file)?;
    let (tr, te) = split(&ratings, 0.9, seed);
    Ok((ratings, tr, te))
}
