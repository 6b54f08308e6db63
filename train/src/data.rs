//! Labelled data sets, read from the cache the fetch scripts fill (never
//! from the repository: third-party data is not committed).
//!
//! Takes a data set's name — `digits`: scikit-learn's 8×8 handwritten
//! digits (1,797 images, 64 features), cached by `scripts/fetch-digits.sh`
//! in `${TOFU_DATA_CACHE:-~/.cache/tofu}/sklearn-digits/digits.csv`;
//! `fashion-mnist`: Zalando's Fashion-MNIST (60,000 training and 10,000
//! test 28×28 grey images, 10 classes), cached by
//! `scripts/fetch-fashion-mnist.sh` in `…/fashion-mnist/` as IDX files —
//! and gives a [`DataSet`]: row-major features `x[samples, features]` in
//! `[0, 1]` and a class per sample; [`load_splits`] gives the training and
//! held-out parts (a seeded split of digits, Fashion-MNIST's own test set).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::samples::{cross_entropy, Samples};
use crate::tensors::TensorSet;
use crate::text::{self, TokenSet};
use crate::TrainError;

/// The data sets [`load_splits`] knows, for messages.
pub const NAMES: &str = "digits, fashion-mnist, kjv, or a .safetensors file or directory";

/// A loaded data set of either task.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// Labelled feature vectors (classification).
    Classes(DataSet),
    /// A byte corpus (language modelling).
    Text(TokenSet),
    /// Tensors from safetensors files, by graph input.
    Tensors(TensorSet),
}

/// How [`load_splits`] reads and splits a data set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataOptions {
    /// Fraction held out of a data set without its own test split.
    pub held_out: f64,
    /// Seed of that split.
    pub seed: u64,
    /// Window length of a text corpus (bytes).
    pub seq: usize,
    /// Graph input → tensor name, for safetensors files (`--input NAME=TENSOR`).
    pub inputs: BTreeMap<String, String>,
}

impl DataOptions {
    /// The `--input NAME=TENSOR` mapping of `pairs`.
    ///
    /// Errors: [`TrainError::Data`] naming a pair without `=`.
    pub fn parse_inputs(pairs: &[String]) -> Result<BTreeMap<String, String>, TrainError> {
        pairs
            .iter()
            .map(|m| {
                let (k, v) = m.split_once('=').ok_or_else(|| {
                    TrainError::Data(format!(
                        "--input {m}: expected NAME=TENSOR (a graph input and a tensor of the file)"
                    ))
                })?;
                Ok((k.to_string(), v.to_string()))
            })
            .collect()
    }
}

impl Data {
    /// As the feed and the evaluation see it.
    pub fn samples(&self) -> &dyn Samples {
        match self {
            Data::Classes(d) => d,
            Data::Text(t) => t,
            Data::Tensors(t) => t,
        }
    }
}

impl Samples for DataSet {
    fn len(&self) -> usize {
        self.y.len()
    }

    fn inputs(&self) -> Vec<(&str, usize)> {
        vec![("x", self.features), ("labels", 1)]
    }

    fn sample(&self, i: usize, k: usize) -> std::borrow::Cow<'_, [f32]> {
        if k == 0 {
            return self.row(i).into();
        }
        vec![self.y[i] as f32].into()
    }

    fn classes(&self) -> Option<usize> {
        Some(self.classes)
    }

    fn score(&self, i: usize, logits: &[f32]) -> (f64, usize, usize) {
        let (l, ok) = cross_entropy(logits, self.y[i]);
        (l, usize::from(ok), 1)
    }
}

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

/// The classification data set `name` from the cache (see the module
/// doc), whole (for Fashion-MNIST: the training set).
///
/// Errors: [`TrainError::Data`] for an unknown name or a corpus, a missing
/// file (naming the script that fetches it) or a malformed line (naming
/// file and line).
pub fn load(name: &str) -> Result<DataSet, TrainError> {
    if name == "digits" {
        // In the file's order (a split would permute it).
        return load_digits(&cache_dir().join("sklearn-digits/digits.csv"));
    }
    match load_splits(name, &DataOptions::default())?.0 {
        Data::Classes(d) => Ok(d),
        _ => Err(TrainError::Data(format!(
            "--data {name}: not one of the built-in labelled data sets ({NAMES})"
        ))),
    }
}

/// The training and held-out parts of data set `name`: digits split by
/// [`DataSet::split`] (`held_out`, `seed`); Fashion-MNIST's own 60,000 /
/// 10,000 split; the `kjv` corpus in windows of `seq` bytes, its last
/// tenth held out ([`text::load_kjv`]); a `.safetensors` file or a
/// directory of them ([`TensorSet`], feeding the inputs of `opts.inputs`,
/// else `x` and `labels`, or `ids` and `labels` when the file has `ids`),
/// split as digits.
///
/// Errors: as [`load`]; [`TensorSet::load`]'s.
pub fn load_splits(name: &str, opts: &DataOptions) -> Result<(Data, Data), TrainError> {
    let (held_out, seed, seq) = (opts.held_out, opts.seed, opts.seq);
    let classes = |(a, b): (DataSet, DataSet)| (Data::Classes(a), Data::Classes(b));
    let path = Path::new(name);
    if name.ends_with(".safetensors") || path.is_dir() {
        let mut inputs: Vec<&str> = opts.inputs.keys().map(String::as_str).collect();
        if inputs.is_empty() {
            inputs = vec![
                if tensor_named(path, "ids") {
                    "ids"
                } else {
                    "x"
                },
                "labels",
            ];
        }
        let set = TensorSet::load(path, &inputs, &opts.inputs)?;
        let (a, b) = set.split(held_out, seed);
        return Ok((Data::Tensors(a), Data::Tensors(b)));
    }
    match name {
        "digits" => {
            let d = load_digits(&cache_dir().join("sklearn-digits/digits.csv"))?;
            Ok(classes(d.split(held_out, seed)))
        }
        "fashion-mnist" => {
            let dir = cache_dir().join("fashion-mnist");
            let part = |p: &str| {
                let images = dir.join(format!("{p}-images-idx3-ubyte"));
                load_idx(&images, &dir.join(format!("{p}-labels-idx1-ubyte")))
            };
            Ok(classes((part("train")?, part("t10k")?)))
        }
        "kjv" => {
            let (a, b) = text::load_kjv(&cache_dir().join("kjv/kjv.txt"), seq)?;
            Ok((Data::Text(a), Data::Text(b)))
        }
        other => Err(TrainError::Data(format!(
            "--data {other}: unknown data set; expected one of: {NAMES}"
        ))),
    }
}

/// Whether the (first) safetensors file of `path` has a tensor `name`.
fn tensor_named(path: &Path, name: &str) -> bool {
    let first = if path.is_dir() {
        std::fs::read_dir(path).ok().and_then(|d| {
            let mut v: Vec<PathBuf> = d
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
                .collect();
            v.sort();
            v.into_iter().next()
        })
    } else {
        Some(path.to_path_buf())
    };
    first
        .and_then(|f| std::fs::read(f).ok())
        .and_then(|b| {
            safetensors::SafeTensors::read_metadata(&b)
                .ok()
                .map(|(_, m)| m.tensors().contains_key(name))
        })
        .unwrap_or(false)
}

/// Read a big-endian u32 at `at` of an IDX file.
fn be_u32(bytes: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize)
}

/// An IDX image file (`0x00000803`, count, rows, columns, then one byte per
/// pixel) and its label file (`0x00000801`, count, one byte per label), as
/// MNIST and Fashion-MNIST ship them; pixels are scaled to `[0, 1]`.
///
/// Errors: [`TrainError::Data`] naming the file: missing (with the script
/// that fetches it), another magic number, a size that does not match the
/// header, labels outside 0–9 or a count that differs between the files.
pub fn load_idx(images: &Path, labels: &Path) -> Result<DataSet, TrainError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| {
            TrainError::Data(format!(
                "{}: {e}: run scripts/fetch-fashion-mnist.sh to cache Fashion-MNIST",
                p.display()
            ))
        })
    };
    let bad = |p: &Path, why: &str| TrainError::Data(format!("{}: {why}", p.display()));
    let (img, lab) = (read(images)?, read(labels)?);
    let (Some(0x803), Some(n), Some(h), Some(w)) = (
        be_u32(&img, 0),
        be_u32(&img, 4),
        be_u32(&img, 8),
        be_u32(&img, 12),
    ) else {
        return Err(bad(images, "not an IDX image file (magic 0x00000803)"));
    };
    if img.len() != 16 + n * h * w {
        return Err(bad(
            images,
            &format!("{} bytes for {n} images of {h}×{w}", img.len()),
        ));
    }
    let (Some(0x801), Some(m)) = (be_u32(&lab, 0), be_u32(&lab, 4)) else {
        return Err(bad(labels, "not an IDX label file (magic 0x00000801)"));
    };
    if m != n || lab.len() != 8 + n {
        return Err(bad(
            labels,
            &format!("{m} labels in {} bytes for {n} images", lab.len()),
        ));
    }
    let y: Vec<usize> = lab[8..].iter().map(|&v| v as usize).collect();
    if y.iter().any(|&c| c > 9) {
        return Err(bad(labels, "a label outside 0–9"));
    }
    Ok(DataSet {
        x: img[16..].iter().map(|&p| p as f32 / 255.0).collect(),
        y,
        features: h * w,
        classes: 10,
    })
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

    #[test]
    fn idx_files_are_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("tofu-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ip, lp) = (dir.join("i"), dir.join("l"));
        let mut img = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2];
        img.extend([0, 255, 51, 102]);
        std::fs::write(&ip, &img).unwrap();
        std::fs::write(&lp, [0, 0, 8, 1, 0, 0, 0, 2, 7, 3]).unwrap();
        let d = load_idx(&ip, &lp).unwrap();
        assert_eq!((d.features, d.y.clone()), (2, vec![7, 3]));
        assert_eq!(d.x, vec![0.0, 1.0, 0.2, 0.4]);
        std::fs::write(&lp, [0, 0, 8, 1, 0, 0, 0, 3, 7, 3, 1]).unwrap();
        let e = load_idx(&ip, &lp).unwrap_err().to_string();
        assert!(e.contains("3 labels") && e.contains("for 2 images"), "{e}");
        std::fs::write(&ip, &img[..18]).unwrap();
        let e = load_idx(&ip, &lp).unwrap_err().to_string();
        assert!(e.contains("18 bytes for 2 images of 1×2"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
