//! MovieLens-100K ratings from RecBole's atomic file `ml-100k.inter`
//! (tab-separated `user_id:token item_id:token rating:float timestamp:float`,
//! one header line), as shipped in the `recbole==1.2.1` wheel and fetched by
//! `scripts/fetch-movielens.sh` into the cache.
//!
//! Takes a path; gives ratings with users and items renumbered densely from
//! 0 in order of first appearance. Keeps true: every line is parsed or the
//! error names the file and line.

use std::path::{Path, PathBuf};

use crate::error::LoopError;

/// One rating: (user, item, stars).
pub type Rating = (usize, usize, f32);

/// Ratings with dense ids.
#[derive(Debug, Clone)]
pub struct Ratings {
    /// (user, item, rating), in file order.
    pub ratings: Vec<Rating>,
    /// Number of distinct users.
    pub users: usize,
    /// Number of distinct items.
    pub items: usize,
}

/// Where `scripts/fetch-movielens.sh` puts the file:
/// `${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/recbole-1.2.1/ml-100k.inter`.
pub fn default_path() -> PathBuf {
    let root = std::env::var_os("TOFU_DATA_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/root"));
            home.join(".cache/tofu")
        });
    root.join("recbole-1.2.1/ml-100k.inter")
}

/// Read an `.inter` file. Errors name the file (missing: how to fetch it)
/// or the line that does not parse.
pub fn load(path: &Path) -> Result<Ratings, LoopError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoopError::Data {
        path: path.display().to_string(),
        why: format!(
            "{e}; run `bash scripts/fetch-movielens.sh` (or set TOFU_DATA_CACHE) to fetch it"
        ),
    })?;
    let mut users = std::collections::HashMap::new();
    let mut items = std::collections::HashMap::new();
    let mut ratings = vec![];
    for (n, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |what: &str| LoopError::Data {
            path: path.display().to_string(),
            why: format!(
                "line {}: {what} (expected `user<TAB>item<TAB>rating<TAB>timestamp`)",
                n + 1
            ),
        };
        let mut f = line.split('\t');
        let (Some(u), Some(i), Some(r)) = (f.next(), f.next(), f.next()) else {
            return Err(bad("fewer than three fields"));
        };
        let r: f32 = r
            .trim()
            .parse()
            .map_err(|_| bad("the rating is not a number"))?;
        let nu = users.len();
        let u = *users.entry(u.to_string()).or_insert(nu);
        let ni = items.len();
        let i = *items.entry(i.to_string()).or_insert(ni);
        ratings.push((u, i, r));
    }
    if ratings.is_empty() {
        return Err(LoopError::Data {
            path: path.display().to_string(),
            why: "no ratings".into(),
        });
    }
    Ok(Ratings {
        ratings,
        users: users.len(),
        items: items.len(),
    })
}
