//! MovieLens-style ratings: reading RecBole `.inter` files and the seeded
//! train/held-out split.
//!
//! Takes a file path (or [`default_path`], the cache
//! `scripts/fetch-movielens.sh` fills); gives [`Ratings`] with dense user and item indices
//! (in order of first appearance, so every process reading the same file
//! agrees on them) and [`split`]'s two sets.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::error::SspError;

/// One rating: user index, item index, rating (1–5 for MovieLens).
pub type Rating = (u32, u32, f32);

/// Ratings with dense user and item indices.
#[derive(Clone, Debug)]
pub struct Ratings {
    /// The ratings.
    pub ratings: Vec<Rating>,
    /// Distinct users.
    pub users: u32,
    /// Distinct items.
    pub items: u32,
}

/// Where `scripts/fetch-movielens.sh` caches MovieLens-100K:
/// `$TOFU_MOVIELENS_CACHE/ml-100k.inter`, by default
/// `~/.cache/tofu/recbole-1.2.1/ml-100k.inter` (the file may be missing).
pub fn default_path() -> PathBuf {
    let cache = match std::env::var_os("TOFU_MOVIELENS_CACHE") {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/tofu/recbole-1.2.1"),
    };
    cache.join("ml-100k.inter")
}

/// Reads a RecBole `.inter` file (tab-separated, a header line, columns
/// `user_id:token`, `item_id:token`, `rating:float`, …), mapping tokens to
/// dense indices in order of first appearance.
///
/// # Errors
/// [`SspError::Io`] when the file cannot be read; [`SspError::Config`]
/// naming the line when a line does not parse.
pub fn load_inter(path: &Path) -> Result<Ratings, SspError> {
    let text = std::fs::read_to_string(path).map_err(|e| SspError::Io {
        what: format!("reading {}", path.display()),
        source: e,
    })?;
    let mut users = HashMap::new();
    let mut items = HashMap::new();
    let mut ratings = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || {
            SspError::Config(format!(
                "{}:{}: expected `user<TAB>item<TAB>rating…`",
                path.display(),
                n + 1
            ))
        };
        if f.len() < 3 {
            return Err(bad());
        }
        let r: f32 = f[2].trim().parse().map_err(|_| bad())?;
        let nu = users.len() as u32;
        let u = *users.entry(f[0].to_string()).or_insert(nu);
        let ni = items.len() as u32;
        let i = *items.entry(f[1].to_string()).or_insert(ni);
        ratings.push((u, i, r));
    }
    Ok(Ratings {
        ratings,
        users: users.len() as u32,
        items: items.len() as u32,
    })
}

/// Splits ratings into training and held-out sets: a seeded shuffle, the
/// first `train_fraction` for training.
pub fn split(data: &Ratings, train_fraction: f64, seed: u64) -> (Vec<Rating>, Vec<Rating>) {
    let mut all = data.ratings.clone();
    all.shuffle(&mut StdRng::seed_from_u64(seed));
    let n = (all.len() as f64 * train_fraction).round() as usize;
    let test = all.split_off(n.min(all.len()));
    (all, test)
}
