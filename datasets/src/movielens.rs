//! MovieLens-100K ratings from RecBole's atomic file `ml-100k.inter`
//! (tab-separated `user_id:token item_id:token rating:float timestamp:float`,
//! one header line), as shipped in the `recbole==1.2.1` wheel and fetched by
//! `scripts/fetch-movielens.sh` into the data cache.
//!
//! Takes a path (or [`default_path`]); gives [`Ratings`] with users and items
//! renumbered densely from 0 in order of first appearance (so every process
//! reading the same file agrees on them). Keeps true: every line is parsed
//! or the error names the file and line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::DataError;

/// One rating: user index, item index, stars (1–5 for MovieLens).
pub type Rating = (u32, u32, f32);

/// Ratings with dense user and item indices.
#[derive(Clone, Debug)]
pub struct Ratings {
    /// (user, item, rating), in file order.
    pub ratings: Vec<Rating>,
    /// Number of distinct users.
    pub users: u32,
    /// Number of distinct items.
    pub items: u32,
}

/// Where `scripts/fetch-movielens.sh` puts the file:
/// `${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/recbole-1.2.1/ml-100k.inter`
/// ([`crate::cache_dir`]; the file may be missing).
pub fn default_path() -> PathBuf {
    crate::cache_dir().join("recbole-1.2.1/ml-100k.inter")
}

/// Reads a RecBole `.inter` file (see the module doc).
///
/// # Errors
/// [`DataError::Read`] when the file cannot be read (naming the fetch
/// script), [`DataError::Line`] naming the line that does not parse,
/// [`DataError::Empty`] when it holds no rating.
pub fn load(path: &Path) -> Result<Ratings, DataError> {
    let text = std::fs::read_to_string(path).map_err(|source| DataError::Read {
        path: path.to_path_buf(),
        script: "fetch-movielens.sh",
        source,
    })?;
    let mut users = HashMap::new();
    let mut items = HashMap::new();
    let mut ratings = vec![];
    for (n, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |what| DataError::Line {
            path: path.to_path_buf(),
            line: n + 1,
            what,
            expected: "`user<TAB>item<TAB>rating<TAB>timestamp`",
        };
        let mut f = line.split('\t');
        let (Some(u), Some(i), Some(r)) = (f.next(), f.next(), f.next()) else {
            return Err(bad("fewer than three fields"));
        };
        let r: f32 = r
            .trim()
            .parse()
            .map_err(|_| bad("the rating is not a number"))?;
        let nu = users.len() as u32;
        let u = *users.entry(u.to_string()).or_insert(nu);
        let ni = items.len() as u32;
        let i = *items.entry(i.to_string()).or_insert(ni);
        ratings.push((u, i, r));
    }
    if ratings.is_empty() {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(Ratings {
        ratings,
        users: users.len() as u32,
        items: items.len() as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("tofu-ml-{name}-{}.inter", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn renumbers_users_and_items_by_first_appearance() {
        let p = file(
            "ok",
            "user_id:token\titem_id:token\trating:float\ttimestamp:float\n\
             196\t242\t3\t881250949\n186\t302\t3.5\t891717742\n196\t302\t1\t878887116\n\n",
        );
        let r = load(&p).unwrap();
        assert_eq!(r.ratings, [(0, 0, 3.0), (1, 1, 3.5), (0, 1, 1.0)]);
        assert_eq!((r.users, r.items), (2, 2));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let p = file("bad", "header\n1\t2\t3\t4\n1\t2\tfive\t4\n");
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains(&format!("{}:3:", p.display())), "{e}");
        assert!(e.contains("not a number"), "{e}");
        std::fs::write(&p, "header\n1\t2\n").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains(":2: fewer than three fields"), "{e}");
        std::fs::write(&p, "header only\n").unwrap();
        assert!(matches!(load(&p), Err(DataError::Empty { .. })));
        std::fs::remove_file(&p).unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("fetch-movielens.sh"), "{e}");
    }
}
