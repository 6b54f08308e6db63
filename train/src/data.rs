//! Labelled data sets, read from the cache the fetch scripts fill (never
//! from the repository: third-party data is not committed).
//!
//! Takes a data set's name (`digits`: scikit-learn's 8×8 handwritten
//! digits, cached by `scripts/fetch-digits.sh` in
//! `${TOFU_DATA_CACHE:-~/.cache/tofu}/sklearn-digits/digits.csv`); gives a
//! [`DataSet`]: row-major features `x[samples, features]` in `[0, 1]` and a
//! class per sample, and [`DataSet::split`] into a training and a held-out
//! part by a seeded permutation.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::TrainError;

/// The data sets [`load`] knows, for messages.
pub const NAMES: &str = "digits";

/// A labelled data set (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct DataSet {
    /// Features, row-major `[samples, features]`, each in `[0, 1]`.
    pub x: Vec<f32>,
    /// Class of each sample, `< classes`.
    pub y: Vec<usize>,
    /// Features per sample.
    pub features: usize,
    /// Number of classes.
    pub classes: usize,
}

impl DataSet {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// Whether it has no samples.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// The features of sample `i` (`features` values).
    pub fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.features..(i + 1) * self.features]
    }

    /// The samples `idx` in that order.
    pub fn subset(&self, idx: &[usize]) -> DataSet {
        DataSet {
            x: idx.iter().flat_map(|&i| self.row(i)).copied().collect(),
            y: idx.iter().map(|&i| self.y[i]).collect(),
            features: self.features,
            classes: self.classes,
        }
    }

    /// A training and a held-out part: the samples in the order of a
    /// permutation seeded by `seed`, the first `⌊len · held_out⌋` held out.
    pub fn split(&self, held_out: f64, seed: u64) -> (DataSet, DataSet) {
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.shuffle(&mut StdRng::seed_from_u64(seed));
        let n_test = ((self.len() as f64) * held_out.clamp(0.0, 1.0)) as usize;
        (self.subset(&order[n_test..]), self.subset(&order[..n_test]))
    }
}

/// The cache the fetch scripts fill: `$TOFU_DATA_CACHE`, else
/// `~/.cache/tofu`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("TOFU_DATA_CACHE") {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/tofu"),
    }
}

/// The data set `name` from the cache (see the module doc).
///
/// Errors: [`TrainError::Data`] for an unknown name, a missing file (naming
/// the script that fetches it) or a malformed line (naming file and line).
pub fn load(name: &str) -> Result<DataSet, TrainError> {
    match name {
        "digits" => load_digits(&cache_dir().join("sklearn-digits/digits.csv")),
        "fashion-mnist" => Err(TrainError::Data(
            "--data fashion-mnist: not fetched by this version (Debian's dataset-fashion-mnist is not cached); use --data digits".into(),
        )),
        other => Err(TrainError::Data(format!(
            "--data {other}: unknown data set; expected one of: {NAMES}"
        ))),
    }
}

/// scikit-learn's `digits.csv`: 64 pixels 0–16 and a label 0–9 per line;
/// pixels are scaled to `[0, 1]`.
///
/// Errors: [`TrainError::Data`] naming the file (and line).
pub fn load_digits(path: &Path) -> Result<DataSet, TrainError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        TrainError::Data(format!(
            "{}: {e}: run scripts/fetch-digits.sh to cache the digits set",
            path.display()
        ))
    })?;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: &str| TrainError::Data(format!("{}:{}: {why}", path.display(), n + 1));
        let v: Vec<f32> = line
            .split(',')
            .map(|f| f.trim().parse::<f32>())
            .collect::<Result<_, _>>()
            .map_err(|e| bad(&e.to_string()))?;
        if v.len() != 65 || !(0.0..=9.0).contains(&v[64]) || v[64].fract() != 0.0 {
            return Err(bad("expected 64 pixels and a label 0–9"));
        }
        x.extend(v[..64].iter().map(|p| p / 16.0));
        y.push(v[64] as usize);
    }
    Ok(DataSet {
        x,
        y,
        features: 64,
        classes: 10,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy(n: usize) -> DataSet {
        DataSet {
            x: (0..n * 2).map(|v| v as f32).collect(),
            y: (0..n).map(|i| i % 3).collect(),
            features: 2,
            classes: 3,
        }
    }

    #[test]
    fn split_partitions_the_samples() {
        let d = toy(10);
        let (train, test) = d.split(0.2, 7);
        assert_eq!((train.len(), test.len()), (8, 2));
        let mut firsts: Vec<f32> = train
            .x
            .chunks(2)
            .chain(test.x.chunks(2))
            .map(|r| r[0])
            .collect();
        firsts.sort_by(f32::total_cmp);
        assert_eq!(firsts, (0..10).map(|i| (2 * i) as f32).collect::<Vec<_>>());
        for (r, &c) in train.x.chunks(2).zip(&train.y) {
            assert_eq!(c, (r[0] as usize / 2) % 3, "a row keeps its label");
        }
    }

    #[test]
    fn malformed_lines_name_the_file_and_line() {
        let dir = std::env::temp_dir().join(format!("tofu-digits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("digits.csv");
        let good = vec!["0"; 64].join(",") + ",3";
        std::fs::write(&p, format!("{good}\n{good},1\n")).unwrap();
        let e = load_digits(&p).unwrap_err().to_string();
        assert!(e.contains("digits.csv:2:"), "{e}");
        std::fs::write(&p, format!("{good}\n")).unwrap();
        let d = load_digits(&p).unwrap();
        assert_eq!((d.len(), d.y[0]), (1, 3));
        std::fs::remove_dir_all(&dir).unwrap();
        let missing = load_digits(&dir.join("nope.csv")).unwrap_err().to_string();
        assert!(missing.contains("scripts/fetch-digits.sh"), "{missing}");
    }
}
